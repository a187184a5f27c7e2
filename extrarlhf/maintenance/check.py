"""``extrarlhf check`` (alias ``fsck``): walk the sessions, datasets and checkpoints dirs and
list every problem (:func:`check_all`; the MCP tool ``check_data``).

Read-only by default: nothing is written, renamed or locked (no lock file is created). Each
problem says where it is (``path``, ``line``, ``field`` when a record is damaged), what is
wrong (``code``, ``message``), how bad (``severity``: ``error`` or ``warning``) and whether
``--repair`` would fix it (``repairable``). ``repair=True`` applies only repairs that are
provably safe, and says what it did (``repaired``):

* sessions: whatever ``extrarlhf.runtime.sessions.check_sessions(sessions_dir, repair=...)``
  repairs (its own rules; e.g. a catalog line rebuilt from an intact trace);
* promotion records: the crash repair every promotion reader runs anyway (an intent whose
  pointer was or was never written, a history line a crash did not write; promotion.py). A
  damaged record (a history line, ``promoted.json``) is never repaired: it is reported with its
  file, line and field, and promotion, rollback and overwrites stay refused until a person
  fixes it;
* stale model cards (a card whose ``weights_hash`` is not the registered one) are renamed to
  ``<name>.card.json.stale-<hash>``: they describe weights that are not registered, and are
  kept, not deleted;
* dataset publications a dead process left (``.tmp-``/``.old-``/``.trash-`` folders whose
  publisher is not running) are recovered as the next publication would (publish.py).

Nothing else is repaired: a dataset that fails validation, a stale or dangling pointer, a
changed or missing model file, an unreadable benchmark report or registry index are only
reported (their fix needs a decision: re-materialize, re-point, re-register...).

What is checked:

* sessions: ``check_sessions`` (catalogs, manifests, summaries, leases, traces), called as
  soon as it exists in this version (when it does not, the report says the sessions were not
  checked, in ``skipped``);
* datasets: every dataset folder (confinement), leftovers of publications, every version
  folder (a manifest, and ``validate_dataset``: file hashes, row counts, schemas, invariants),
  every pointer (well formed, confined, resolves to an existing version whose manifest it was
  promoted for);
* checkpoints: the registry index, each registered model file (present, sha256 as
  registered), model files no entry names (any ``*.onnx`` of the folder, registry-named or
  copied by hand), every model card (well formed, describes the
  registered weights), the promotion records (pointer, history, intent, and the promoted
  checkpoint still registered and intact), the benchmark reports (readable) and the policy
  ladder (``ladder.json``: readable and of this schema version; a warning, since it only
  caches measurements).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InvalidArgument, RLHFError
from ..core.procpool import auto_workers

__all__ = ["check_all", "add_parser"]

SEVERITIES = ("error", "warning")


class _Report:
    def __init__(self, repair: bool) -> None:
        self.repair = repair
        self.problems: list[dict[str, Any]] = []
        self.repaired: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []
        self.checked: dict[str, dict[str, Any]] = {}

    def problem(self, area: str, code: str, message: str, *, path: Any = None, line: int | None = None,
                field: str | None = None, severity: str = "error", repairable: bool = False,
                **extra: Any) -> None:
        self.problems.append({"area": area, "severity": severity, "code": code,
                              "path": None if path is None else str(path), "line": line, "field": field,
                              "message": message, "repairable": repairable, **extra})

    def error(self, area: str, exc: RLHFError, *, path: Any = None, severity: str = "error") -> None:
        details = getattr(exc, "details", None) or {}
        self.problem(area, exc.code, str(exc), path=details.get("path") or details.get("file") or path,
                     line=details.get("line"), field=details.get("field"), severity=severity)

    def fixed(self, area: str, action: str, path: Any = None) -> None:
        self.repaired.append({"area": area, "path": None if path is None else str(path), "action": action})

    def as_dict(self, roots: dict[str, str | None]) -> dict[str, Any]:
        errors = [p for p in self.problems if p["severity"] == "error"]
        return {"ok": not errors, "repair": self.repair, "roots": roots, "problems": self.problems,
                "repaired": self.repaired, "skipped": self.skipped, "checked": self.checked,
                "counts": {"errors": len(errors), "warnings": len(self.problems) - len(errors),
                           "repaired": len(self.repaired), "repairable": sum(p["repairable"] for p in self.problems)}}


# ---------------------------------------------------------------------------- sessions
def _check_sessions(sessions_dir: Path, report: _Report, workers: int | None = 1) -> None:
    try:
        from ..runtime.sessions import check_sessions  # written alongside this module (issue 14)
    except ImportError:
        check_sessions = None
    if check_sessions is None:
        report.skipped.append({"area": "sessions", "path": str(sessions_dir.absolute()),
                               "reason": "this version has no session check yet "
                                         "(extrarlhf.runtime.sessions.check_sessions); the sessions were not "
                                         "checked"})
        return
    # a list of problems: group, path, line, field, code, message, repairable, repaired (its docstring)
    problems = list(check_sessions(sessions_dir, repair=report.repair, workers=workers))
    report.checked["sessions"] = {"problems_found": len(problems)}
    known = {"severity", "code", "path", "file", "line", "field", "message", "repairable", "repaired", "area"}
    for item in problems:
        if not isinstance(item, dict):
            report.problem("sessions", "session_problem", str(item))
            continue
        message = str(item.get("message") or item.get("problem") or item)
        where = item.get("path") or item.get("file")
        if item.get("repaired"):  # fixed by this call
            report.fixed("sessions", f"{item.get('code') or 'repaired'}: {message}", where)
            continue
        severity = item.get("severity") if item.get("severity") in SEVERITIES else "error"
        report.problem("sessions", str(item.get("code") or "session_problem"), message, path=where,
                       line=item.get("line"), field=item.get("field"), severity=severity,
                       repairable=bool(item.get("repairable", False)),
                       **{k: v for k, v in item.items() if k not in known})


# ---------------------------------------------------------------------------- datasets
def _check_datasets(datasets_dir: Path, report: _Report) -> None:
    from ..datasets.paths import POINTERS_DIR, VERSION_DIR, DatasetsDir
    from ..datasets.pointers import resolve
    from ..datasets.publish import leftovers, sweep_dataset
    from ..datasets.validate import validate_dataset

    dirs = DatasetsDir(datasets_dir)
    counts = {"datasets": 0, "versions": 0, "pointers": 0}
    report.checked["datasets"] = counts
    root = Path(dirs.real_root())
    for name in dirs.names():
        counts["datasets"] += 1
        try:
            folder = dirs.dataset_dir(name)
        except RLHFError as exc:  # a dataset folder linked outside: never read
            report.error("datasets", exc, path=datasets_dir / name)
            continue
        if report.repair and any(not item["owner_alive"] for item in leftovers(folder)):
            for entry in sweep_dataset(folder) or []:  # None: a publication is running there right now
                if entry["action"] in ("deleted", "restored"):
                    report.fixed("datasets", entry["message"], entry["path"])
        for item in leftovers(folder):
            if item["owner_alive"]:
                continue  # a publication in progress
            report.problem("datasets", "unfinished_publication",
                           f"{folder / item['folder']}: left by a publisher that died (pid {item['pid']}); "
                           f"{'restoring' if item['kind'] == 'old' else 'deleting'} it is what the next "
                           f"publication (or `extrarlhf gc`) does", path=folder / item["folder"], severity="warning",
                           repairable=True)
        for child in sorted(folder.iterdir()):
            match = VERSION_DIR.fullmatch(child.name)
            if match is None:
                continue
            try:
                version_dir = dirs.version_dir(name, int(match.group(1)))
            except RLHFError as exc:
                report.error("datasets", exc, path=child)
                continue
            if not (version_dir / "manifest.json").is_file():
                report.problem("datasets", "version_without_manifest",
                               f"{version_dir} is a version folder without manifest.json: it is not a published "
                               f"version (readers ignore it); restore its manifest or move the folder aside",
                               path=version_dir)
                continue
            counts["versions"] += 1
            dataset_id = f"{name}/v{match.group(1)}"
            try:
                validation = validate_dataset(dataset_id, datasets_dir=dirs)
            except RLHFError as exc:
                report.error("datasets", exc, path=version_dir)
                continue
            for failure in validation["failures"]:
                file = failure.get("file")
                report.problem("datasets", failure["code"], f"{dataset_id}: {failure['message']}",
                               path=version_dir / file if isinstance(file, str) else version_dir,
                               **{k: v for k, v in failure.items() if k in ("table", "battle_id", "more")})
    pointers = root / POINTERS_DIR
    if not os.path.lexists(pointers):
        return
    try:
        folder = dirs.pointers_dir()
    except RLHFError as exc:
        report.error("datasets", exc, path=pointers)
        return
    if not folder.is_dir():
        report.problem("datasets", "pointers_not_a_folder", f"{folder} is not a folder; pointers cannot be read",
                       path=folder)
        return
    for path in sorted(folder.glob("*.json")):
        counts["pointers"] += 1
        pointer = path.name[: -len(".json")]
        try:
            resolve(dirs, f"@{pointer}")
        except RLHFError as exc:
            report.error("datasets", exc, path=path)


# ---------------------------------------------------------------------------- checkpoints
_MODEL_FILE = re.compile(r"(?P<name>.+)\.(?P<sha>[0-9a-f]{12})\.onnx")


def _check_checkpoints(checkpoints_dir: Path, report: _Report) -> None:
    from ..checkpoints.registry import CheckpointRegistry
    from ..policies.benchmarking import list_benchmarks
    from ..policies.ladder import ladder_path, read_ladder
    from ..policies.promotion import check_promotion
    from ..training.card import CARD_SUFFIX, card_status, set_stale_card_aside

    counts = {"checkpoints": 0, "cards": 0, "benchmark_reports_unreadable": 0}
    report.checked["checkpoints"] = counts
    registry = CheckpointRegistry(checkpoints_dir)
    entries: list[dict[str, Any]] | None
    try:
        entries = registry.list()
    except RLHFError as exc:
        report.error("checkpoints", exc, path=registry.index_path.absolute())
        entries = None
    if entries is not None:
        counts["checkpoints"] = len(entries)
        named = set()
        for entry in entries:
            info = registry.inspect(entry["name"])
            named.add(Path(info["path"]).name)
            if not info["file_present"]:
                report.problem("checkpoints", "model_file_missing",
                               f"checkpoint {entry['name']!r}: its model file {info['path']} is missing; register the "
                               f"model again", path=info["path"])
            elif not info["file_intact"]:
                message = f"checkpoint {entry['name']!r}: " + (
                    info["file_problem"] or f"its model file {info['path']} changed since it was registered (sha256 "
                                            f"{info['sha256'][:16]}... expected); register the model again")
                report.problem("checkpoints", "model_file_changed", message, path=info["path"])
        if checkpoints_dir.is_dir():
            for path in sorted(checkpoints_dir.glob("*.onnx")):
                if path.name in named:
                    continue
                why = ("left by an interrupted registration or an overwrite" if _MODEL_FILE.fullmatch(path.name)
                       else "copied here by hand: nothing plays a model the registry does not name")
                report.problem("checkpoints", "unreferenced_model_file",
                               f"{path} is a model file no registry entry names ({why}); register it (MCP "
                               f"register_checkpoint, or CheckpointRegistry.register) under a name, or remove it",
                               path=path.absolute(), severity="warning")
            for path in sorted(checkpoints_dir.glob(f"*{CARD_SUFFIX}")):
                counts["cards"] += 1
                name = path.name[: -len(CARD_SUFFIX)]
                status = card_status(checkpoints_dir, name)
                if status["state"] == "stale":
                    aside = set_stale_card_aside(checkpoints_dir, name) if report.repair else None
                    if aside is not None:
                        report.fixed("checkpoints", f"set the stale model card of {name!r} aside as {aside.name} "
                                                    f"(it describes weights_hash "
                                                    f"{status['card_weights_hash'][:16]}..., not the registered "
                                                    f"weights)", path.absolute())
                    else:
                        report.problem("checkpoints", "stale_card", status["message"], path=path.absolute(),
                                       field="weights_hash", repairable=True)
                elif status["state"] == "damaged":
                    details = status.get("details") or {}
                    report.problem("checkpoints", status["code"], status["message"], path=path.absolute(),
                                   line=details.get("line"), field=details.get("field"))
    promotion = check_promotion(checkpoints_dir, repair=report.repair)
    for text in promotion["repaired"]:
        report.fixed("checkpoints", text, checkpoints_dir.absolute())
    for problem in promotion["problems"]:
        report.problem("checkpoints", problem["code"], problem["message"], path=problem["path"],
                       line=problem["line"], field=problem["field"], severity=problem["severity"],
                       repairable=problem["repairable"])
    unreadable: list[str] = []
    list_benchmarks(checkpoints_dir, None, unreadable)
    counts["benchmark_reports_unreadable"] = len(unreadable)
    for text in unreadable:
        report.problem("checkpoints", "benchmark_report_unreadable", text, path=checkpoints_dir / "benchmarks")
    try:
        counts["ladder"] = int(read_ladder(checkpoints_dir) is not None)
    except RLHFError as exc:  # a cache of measurements: a warning, the next ladder call can rebuild it
        counts["ladder"] = 0
        report.error("checkpoints", exc, path=ladder_path(checkpoints_dir).absolute(), severity="warning")


# ---------------------------------------------------------------------------- all
def check_all(sessions_dir: str | os.PathLike[str] | None = "sessions",
              datasets_dir: str | os.PathLike[str] | None = "datasets",
              checkpoints_dir: str | os.PathLike[str] | None = "checkpoints", repair: bool = False,
              workers: int | None = 1) -> dict[str, Any]:
    """Walk the three dirs and list every problem (see the module docstring); a dir given as
    None, or missing, is not walked (``roots`` says which were). Returns ``ok`` (no error left),
    ``problems`` (each ``area``, ``severity``, ``code``, ``path``, ``line``, ``field``,
    ``message``, ``repairable``), ``repaired`` (each ``area``, ``path``, ``action``; only with
    ``repair=True``), ``skipped`` (what could not be checked, with why), ``checked`` (counts)
    and ``counts``. ``repair=False`` (the default) writes nothing. ``workers``: the processes
    (this one included) that hash a group's traces (None: up to 4 for 64 battles or more)."""
    if not isinstance(repair, bool):
        raise InvalidArgument(f"repair must be true or false, got {repair!r}")
    if workers is not None:
        auto_workers(workers, 0)  # refused before anything is read
    report = _Report(repair)
    roots: dict[str, str | None] = {}
    steps: tuple[tuple[str, Any, Callable[[Path, _Report], None]], ...] = (
        ("sessions", sessions_dir, functools.partial(_check_sessions, workers=workers)),
        ("datasets", datasets_dir, _check_datasets),
        ("checkpoints", checkpoints_dir, _check_checkpoints))
    for area, root, step in steps:
        if root is None:
            roots[area] = None
            continue
        path = Path(root)
        if not path.is_dir():
            roots[area] = None
            report.skipped.append({"area": area, "path": str(path.absolute()), "reason": "does not exist"})
            continue
        roots[area] = str(path.absolute())
        try:
            step(path, report)
        except RLHFError as exc:  # a whole area that cannot be walked (e.g. a full filesystem while repairing)
            report.error(area, exc, path=path.absolute())
    return report.as_dict(roots)


# ---------------------------------------------------------------------------- CLI
def _where(problem: dict[str, Any]) -> str:
    """Where a problem is, unless its message already starts by saying so."""
    if problem["path"] is None or problem["message"].startswith(problem["path"]):
        return ""
    return " " + problem["path"] + (f" line {problem['line']}" if problem["line"] is not None else "") + \
        (f" [{problem['field']}]" if problem["field"] else "") + ":"


def _cmd_check(args: argparse.Namespace) -> int:
    result = check_all(args.sessions_dir, args.datasets_dir, args.checkpoints_dir, repair=args.repair,
                       workers=args.workers)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0 if result["ok"] else 1
    for item in result["repaired"]:
        print(f"repaired ({item['area']}): {item['action']}")
    for problem in result["problems"]:
        tail = " (--repair fixes it)" if problem["repairable"] and not result["repair"] else ""
        print(f"{problem['severity']} [{problem['code']}] ({problem['area']}){_where(problem)} "
              f"{problem['message']}{tail}")
    for item in result["skipped"]:
        print(f"not checked ({item['area']}): {item['path']}: {item['reason']}")
    counts = result["counts"]
    walked = ", ".join(f"{k} {v}" for k, v in result["roots"].items() if v) or "nothing (no dir exists)"
    print(f"{counts['errors']} error(s), {counts['warnings']} warning(s), {counts['repaired']} repaired"
          + (f", {counts['repairable']} repairable with --repair" if counts["repairable"] and not args.repair
             else "") + f"; checked {walked}")
    return 0 if result["ok"] else 1


def add_parser(sub: Any) -> None:
    """Add the ``check`` command (alias ``fsck``) to the CLI's subparsers."""
    p = sub.add_parser("check", aliases=["fsck"],
                       help="walk sessions, datasets and checkpoints and list every problem (read-only; --repair "
                            "fixes only what is provably safe)")
    p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
    p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
    p.add_argument("--checkpoints-dir", default="checkpoints", help="checkpoint registry (default: checkpoints)")
    p.add_argument("--repair", action="store_true",
                   help="also repair what is provably safe (crash leftovers of promotions and publications, "
                        "stale model cards set aside, the session repairs of check_sessions)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes (this one included) hashing a group's traces (default: up to 4 for a group of "
                        "64 battles or more, else 1)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_check)
