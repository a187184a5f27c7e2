"""A throwaway local PostgreSQL server for tests, benchmarks and `make prod-demo` (DESIGN 10.1, STACK.md).

:class:`ThrowawayPostgres` runs ``initdb`` into a fresh temp dir and starts a server that
listens on a unix socket in that dir only (no TCP), with durability off (fsync,
full_page_writes, synchronous_commit) because nothing in it outlives the test. PostgreSQL
refuses to run as root, so as root every server command runs as the ``postgres`` user.
The server is stopped (``pg_ctl -m immediate``) and the dir removed when the context
exits, or at interpreter exit (atexit) when a caller never stops it.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

SERVER_OPTIONS = "-c listen_addresses='' -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bin_dir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: from PATH, else the newest /usr/lib/postgresql/*/bin."""
    candidates = [shutil.which("initdb")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                         key=lambda p: int(re.sub(r"\D", "", Path(p).parents[1].name) or 0), reverse=True)
    for initdb in filter(None, candidates):
        bin_dir = Path(initdb).resolve().parent
        if (bin_dir / "pg_ctl").exists():
            return bin_dir
    raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under "
                              "/usr/lib/postgresql/*/bin; run `make postgres` (or apt-get install postgresql)")


def _free_port() -> int:
    """A port number no one listens on. The server uses it only to name its socket file."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayPostgres:
    """A PostgreSQL server in a temp dir, for the duration of a ``with`` block."""

    def __init__(self) -> None:
        self.bin_dir = find_bin_dir()
        self.root: Path | None = None
        self.port = 0

    def __enter__(self) -> "ThrowawayPostgres":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def data_dir(self) -> Path:
        if self.root is None:
            raise RuntimeError("the server is not running")
        return self.root / "data"

    @property
    def psql_path(self) -> str:
        local = self.bin_dir / "psql"
        found = str(local) if local.exists() else shutil.which("psql")
        if found is None:
            raise PostgresUnavailable("psql not found beside the server binaries nor on PATH")
        return found

    @property
    def pid(self) -> int:
        """The postmaster's process id (first line of ``postmaster.pid``)."""
        return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def start(self) -> None:
        # A short path under /tmp: the socket path must stay under ~100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="extrarlhf-pg-", dir="/tmp"))
        atexit.register(self.stop)
        try:
            if os.geteuid() == 0:
                shutil.chown(self.root, "postgres", "postgres")
            self._server_command("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                                 "--encoding=UTF8", "--locale=C", "--no-sync")
            self.port = _free_port()
            self._server_command("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"),
                                 "-w", "-t", "60", "-o", f"-k {self.root} -p {self.port} {SERVER_OPTIONS}", "start")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server (immediate mode) and remove its dir; safe to call twice."""
        atexit.unregister(self.stop)
        if self.root is None:
            return
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._server_command("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq/asyncpg URL for ``dbname`` over the server's unix socket."""
        return f"postgresql://postgres@/{dbname}?host={self.root}&port={self.port}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` (a plain lowercase identifier) and return its DSN."""
        if not _DB_NAME.fullmatch(name):
            raise ValueError(f"database name must be a lowercase identifier, got {name!r}")
        self.psql("postgres", f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def psql(self, dbname: str, sql: str) -> str:
        """Run ``sql`` with psql (unaligned, tuples only) and return its output."""
        args = [self.psql_path, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(self.root),
                "-p", str(self.port), "-U", "postgres", "-d", dbname, "-c", sql]
        return self._run(args).stdout

    def _server_command(self, name: str, *args: str) -> None:
        """Run a server binary, as the ``postgres`` user when we are root."""
        command = [str(self.bin_dir / name), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        self._run(command)

    def _run(self, command: list[str]) -> subprocess.CompletedProcess:
        # cwd: the postgres user may not be allowed into the caller's working directory.
        done = subprocess.run(command, cwd=self.root, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.root / "server.log" if self.root is not None else None
            tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{Path(command[0]).name} {' '.join(command[1:])} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}{tail}")
        return done
