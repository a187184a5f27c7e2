"""CLI: ``python -m extrarlhf skills install --target T [T ...] [--user] [--trust] [--dry-run] [--force]`` and
``python -m extrarlhf doctor [--target T [--user]]``."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from .clients import CLIENTS
from .doctor import run_doctor
from .install import install_targets


def _scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", action="store_true",
                   help="the user-level folders (~/.claude, ~/.agents, ~/.codex, ~/.config/opencode) instead of "
                        "the project's")
    p.add_argument("--project", default=".", help="the project folder the client runs in (default: the current "
                                                  "folder)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _print_install(report: dict[str, Any], user: bool) -> None:
    would = "would be " if report["dry_run"] else ""
    print(f"{report['client']} ({report['scope']} scope){': dry run, nothing written' if report['dry_run'] else ''}")
    if not report["skills"]:
        print(f"  skills in {report['skills_dir']}: as listed above (one copy for both)")
    for skill in report["skills"]:
        print(f"  skill {skill['name']:<24} {would}{skill['action']:<10} {skill['path']}")
        if skill["files"]:
            print(f"        files: {', '.join(skill['files'])}")
    config, server = report["config"], report["server"]
    print(f"  mcp config {config['path']}: {'.'.join(config['keys'])} {would}{config['action']}")
    print(f"    command {server['command']}")
    print(f"    args    {shlex.join(server['args'])}")
    print(f"    cwd     {server['cwd']}")
    print(f"    env     {', '.join(f'{k}={v}' for k, v in server['env'].items())}")
    if config["kept_env"]:
        print(f"    kept    your own env variables {', '.join(config['kept_env'])}")
    for setting in report["settings"]:
        print(f"  setting {setting['path']}: {setting['setting']} {would}{setting['action']}")
    for skipped in report["skipped"]:
        print(f"  skipped {skipped['what']}: {skipped['why']}")
    for warning in report["warnings"]:
        print(f"  warning: {warning}")
    print(f"  verify: python -m extrarlhf doctor --target {report['target']}{' --user' if user else ''}; "
          f"then {report['verify']}")


def _cmd_install(args: argparse.Namespace) -> int:
    reports = install_targets(args.target, user=args.user, project=args.project, dry_run=args.dry_run,
                              force=args.force, trust=args.trust)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        return 0
    seen: set[str] = set()
    for report in reports:  # a skill folder shared by two targets is printed once, with the first
        report = {**report, "skills": [s for s in report["skills"] if s["path"] not in seen],
                  "warnings": [w for w in report["warnings"] if w not in seen]}
        seen.update(s["path"] for s in report["skills"])
        seen.update(report["warnings"])
        _print_install(report, args.user)
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    report = run_doctor(args.target, user=args.user, project=args.project, timeout=args.timeout)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 1
    print(f"checking {report['source']}")
    for check in report["checks"]:
        print(f"  {check['status'].upper():<5} {check['check']}: {check['detail']}")
        if check["fix"]:
            print(f"        fix: {check['fix']}")
    failed = sum(c["status"] == "fail" for c in report["checks"])
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 0 if report["ok"] else 1


def add_parser(sub: Any) -> None:
    """Add the ``skills`` and ``doctor`` commands to the CLI's subparsers."""
    skills = sub.add_parser("skills", help="install the agent skills and the MCP config for a client")
    ssub = skills.add_subparsers(dest="skills_command", required=True)
    install = ssub.add_parser("install", help="copy the skills where the client looks and merge its MCP config")
    install.add_argument("--target", required=True, choices=list(CLIENTS), nargs="+", action="extend",
                         help="claude (Claude Code), codex, opencode or agents (any other MCP client); several "
                              "targets of one project share the skill folders they both read")
    install.add_argument("--trust", action="store_true",
                         help="also write the settings that let the client use this project's server without "
                              "asking (Claude Code: enabledMcpjsonServers in .claude/settings.local.json, and "
                              "hasTrustDialogAccepted in ~/.claude.json outside a git work tree; Codex: "
                              "trust_level in ~/.codex/config.toml); nothing in the home folder without it")
    install.add_argument("--dry-run", action="store_true", help="show what would be written, write nothing")
    install.add_argument("--force", action="store_true",
                         help="replace a different skill of the same name already in the skills folder")
    _scope_args(install)
    install.set_defaults(func=_cmd_install)

    doctor = sub.add_parser("doctor", help="check the interpreter, imports, MCP server, dirs and production gate")
    doctor.add_argument("--target", choices=list(CLIENTS), default=None,
                        help="check the server entry of this client's installed config (default: the pinned "
                             "entry of this checkout)")
    doctor.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the server (default: 60)")
    _scope_args(doctor)
    doctor.set_defaults(func=_cmd_doctor)
