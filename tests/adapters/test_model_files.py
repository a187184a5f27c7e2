"""Model files are read safely (issue 24): a registered model replaced by a FIFO or by a link to
``/dev/zero`` hung ``inspect_model``, ``start_battle`` and ``check`` (an open that waits for a
writer, a read that never ends). Every read now goes through adapters.model_files: no link
followed, a regular file only, the size cap checked on the opened descriptor before a byte is
read. The end-to-end cases run in a child process with a deadline, so a regression fails the
test instead of hanging the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.model_files import ModelFileError, open_model_file, read_model_file, sha256_model_file
from adapters.onnx_contracts import signature, weights_hash
from tests import onnx_factory as f

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 120  # the child imports the server (a few seconds); a hang is killed here

CHILD = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path
    import anyio
    from mcp import Client
    from extrarlhf.maintenance.check import check_all
    from extrarlhf.checkpoints.registry import CheckpointRegistry
    from mcp_server import build_server
    from tests import onnx_factory as f

    root, how = Path(sys.argv[1]), sys.argv[2]
    registry = CheckpointRegistry(root / "checkpoints")
    path = registry.register("m", f.save(f.v5_model(), root / "m.onnx")).path
    path.unlink()
    os.mkfifo(path) if how == "fifo" else path.symlink_to("/dev/zero")

    async def main():
        async with Client(build_server(root / "sessions", root / "datasets", root / "checkpoints")) as client:
            inspect = (await client.call_tool("inspect_model", {"name": "m"})).structured_content
            battle = (await client.call_tool("start_battle", {"p1_actor_type": "llm", "opponent": "m",
                                                                "group": "g"})).structured_content
            return inspect, battle

    inspect, battle = anyio.run(main)
    problems = check_all(None, None, root / "checkpoints")["problems"]
    print(json.dumps({"inspect": inspect, "battle": battle, "problems": problems}))
''')


@pytest.mark.parametrize("how,what", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                      ("zero", "is a symbolic link (to /dev/zero)")])
def test_a_registered_model_replaced_by_a_fifo_or_a_link_to_dev_zero_is_refused_unread(tmp_path, how, what):
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), how], cwd=REPO, capture_output=True,
                          text=True, timeout=DEADLINE_S, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    model = out["inspect"]["result"]
    assert out["inspect"]["ok"] and (model["file_present"], model["file_intact"]) == (True, False)
    assert what in model["file_problem"] and "register the model again" in model["file_problem"]
    battle = out["battle"]  # the battle starts, the opponent plays its fallback baseline and says why
    assert battle["ok"], battle["error"]
    [problem] = out["problems"]
    assert problem["code"] == "model_file_changed" and what in problem["message"]
    assert "Traceback" not in done.stderr


def _files(tmp_path: Path) -> dict[str, Path]:
    model = Path(f.save(f.v5_model(), tmp_path / "m.onnx"))
    link = tmp_path / "link.onnx"
    link.symlink_to(model)
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.onnx"
    zero.symlink_to("/dev/zero")
    sparse = tmp_path / "huge.onnx"
    with open(sparse, "wb") as fh:  # 1 GiB long, no block written
        os.truncate(fh.fileno(), 1024 ** 3)
    return {"model": model, "link": link, "fifo": fifo, "zero": zero, "dir": tmp_path, "huge": sparse,
            "missing": tmp_path / "nope.onnx"}


def test_only_a_regular_file_under_the_cap_is_read(tmp_path):
    files = _files(tmp_path)
    data = files["model"].read_bytes()
    assert read_model_file(files["model"]) == data
    with open_model_file(files["link"], follow_symlinks=True) as (handle, size):  # a registration's source
        assert size == len(data) and handle.read() == data
    refused = {"link": ("unsafe_model_file", "is a symbolic link"), "fifo": ("unsafe_model_file", "is a FIFO"),
               "zero": ("unsafe_model_file", "is a symbolic link (to /dev/zero)"),
               "dir": ("unsafe_model_file", "is a directory"),
               "huge": ("model_too_large", "1.0 GiB (1073741824 bytes), above the model size cap of 256.0 MiB"),
               "missing": ("not_found", "does not exist")}
    for name, (code, words) in refused.items():
        for reader in (read_model_file, sha256_model_file, weights_hash, signature):
            with pytest.raises(ModelFileError) as info:
                reader(files[name])
            assert info.value.code == code and words in str(info.value), (name, reader, str(info.value))
    with pytest.raises(ModelFileError, match="is a character device"):  # followed, still not a regular file
        with open_model_file(files["zero"], follow_symlinks=True):
            pass
    with pytest.raises(ModelFileError, match="above the model size cap") as info:
        read_model_file(files["model"], max_bytes=len(data) - 1)
    assert info.value.code == "model_too_large"


def test_the_cap_comes_from_the_environment(tmp_path, monkeypatch):
    model = Path(f.save(f.v5_model(), tmp_path / "m.onnx"))
    monkeypatch.setenv("RLHF_MAX_MODEL_BYTES", str(model.stat().st_size - 1))
    with pytest.raises(ModelFileError, match="RLHF_MAX_MODEL_BYTES=<bytes>"):
        read_model_file(model)
    monkeypatch.setenv("RLHF_MAX_MODEL_BYTES", "lots")
    with pytest.raises(Exception, match="RLHF_MAX_MODEL_BYTES='lots' is not a positive number of bytes"):
        read_model_file(model)
