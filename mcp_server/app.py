"""The server class every tool registers on: an ``MCPServer`` whose tools answer with the
ExtraRLHF envelope, errors included (DESIGN section 8).

Every tool parses and checks its arguments, calls the core and shapes the result into the
envelope of :mod:`mcp_server.envelope`. What happens around each call:

1. :meth:`ExtraRLHFServer.call_tool` (the SDK's public per-call entry point, overridden)
   refuses unknown tools, forbidden arguments (salts, DSNs, passwords, raw user ids,
   ``include_players``) and unknown arguments before anything runs, and turns the SDK's
   argument-validation failures into ``invalid_argument`` envelopes. Arguments are validated
   as sent (strict JSON types, the core's own ranges; a string is never re-parsed as JSON).
2. The tool body runs (sync tools in the SDK's worker threads; live matches are guarded
   by :class:`extrarlhf.runtime.live.MatchRegistry`'s per-match locks).
3. Core business errors (``RLHFError`` and friends) become ``isError`` envelopes with
   their stable code; anything else is logged to stderr and reported as ``internal_error``.

Below the tools, malformed JSON-RPC is answered per the spec (:mod:`mcp_server.conformance`,
applied by :mod:`mcp_server.transport`) and ``-32601 Method not found`` does not repeat the
method name.
"""

import functools
import inspect
import logging
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import METHOD_NOT_FOUND, CallToolResult, ToolAnnotations
from pydantic import ValidationError

from extrarlhf.checkpoints import CheckpointRegistry
from extrarlhf.runtime.live import MatchRegistry
from extrarlhf.runtime.sessions import SessionStore

from . import cancel, guards, resources
from .drain import answered_before_exit
from .envelope import EnvelopeResult, failure, from_exception, success
from .limits import Limits
from .listing import lean_schema
from .transport import pipe_stdio

log = logging.getLogger("mcp_server")

SERVER_NAME = "extra-rlhf"

INSTRUCTIONS = """\
ExtraRLHF: play ExtraArena card battles and collect RL / imitation training data.

Rules for a player (read once before playing): resource extrarlhf://rules; the card pool
extrarlhf://cards, what lands on disk extrarlhf://data-format; prompts play_battle, run_campaign.
L2 (play a battle yourself as player 1): start_battle(p1_actor_type="llm") -> read `board`
and `legal_actions` -> submit_action(match_id, action_id, rationale) repeatedly (the opponent
bot moves automatically after each submit; action ids change after every move, so pick from
the latest legal_actions; opponent_moves are described from player 2's side: "your" means
player 2's) -> when `done` is true, finish_battle(match_id) writes the trace. abandon_battle stops early. Match ids live only in this server process.
L1 (campaigns): run_series(group, n_battles, p1_model, opponent) auto-plays model-vs-model
battles with progress notifications; series_status, claim/release/list_codenames.
Sessions and models: list_sessions, inspect_session, replay_battle, list_models,
register_checkpoint, register_custom_model, inspect_model.
Production plane (opt-in, set in this server's environment only): production_status,
export_production_v5_dataset, export_timestamp_dataset; production_disabled names what is
missing.
Every result (structuredContent, and the same JSON as text) is the envelope {"ok": true,
"result": {...}, "error": null} or {"ok": false, "result": null, "error": {"code", "message",
"details"}}; no tool declares another output schema. error.code is stable (e.g.
illegal_action, not_your_turn, match_finished, unknown_match, foreign_match,
invalid_argument, forbidden_argument, not_found). `winner` is null while a battle runs, then
0 (draw), 1 or 2. Never pass secrets, DSNs or user ids as arguments: they are refused.
List and inspect results are paged (limit, cursor): they carry total, returned and next_cursor;
pass next_cursor back as cursor, with the same other arguments, until it is null.
"""

@dataclass(frozen=True)
class ServerConfig:
    sessions_dir: Path
    datasets_dir: Path
    checkpoints_dir: Path
    preferences_dir: Path

    @classmethod
    def from_dirs(cls, sessions_dir: str | os.PathLike[str] = "sessions",
                  datasets_dir: str | os.PathLike[str] = "datasets",
                  checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                  preferences_dir: str | os.PathLike[str] = "preferences") -> "ServerConfig":
        return cls(Path(sessions_dir).absolute(), Path(datasets_dir).absolute(), Path(checkpoints_dir).absolute(),
                   Path(preferences_dir).absolute())


def _version() -> str:
    try:
        return metadata.version("extrarlhf")
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        return "0.0.0"


class ExtraRLHFServer(MCPServer):
    """MCPServer whose every tool answers with the ExtraRLHF envelope, errors included."""

    def __init__(self, config: ServerConfig, limits: Limits | None = None) -> None:
        super().__init__(SERVER_NAME, title="ExtraRLHF", version=_version(), instructions=INSTRUCTIONS,
                         log_level="WARNING", middleware=[_unknown_method_not_repeated])
        self.config = config
        self.limits = limits or Limits()
        self.long_work = cancel.configure(self.limits.long_slots, self.limits.long_waiting)  # for long calls
        self.store = SessionStore(config.sessions_dir)
        self.matches = MatchRegistry(self.store, str(config.checkpoints_dir))  # live, process-local, locked per match
        self.checkpoints = CheckpointRegistry(config.checkpoints_dir)
        self.accepted: dict[str, tuple[str, ...]] = {}  # tool name -> accepted argument names
        self.declared: dict[str, frozenset[str]] = {}  # tool name -> property names its input schema declares
        resources.register(self)  # extrarlhf://rules, cards, data-format and the prompts (not in tools/list)

    def envelope_tool(self, *, title: str, read_only: bool = False, destructive: bool = False,
                      idempotent: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``fn`` (returning its result dict, raising core errors) as an envelope tool."""

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            name = fn.__name__
            signature = inspect.signature(fn, eval_str=True)
            self.accepted[name] = tuple(p for p, param in signature.parameters.items()
                                        if param.annotation is not Context)
            refused = [p for p in self.accepted[name] if guards.forbidden_name(p)]
            assert not refused, f"{name}: argument names {refused} would be refused by the guards"

            if inspect.iscoroutinefunction(fn):
                @functools.wraps(fn)
                async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
                    try:
                        return success(await fn(*args, **kwargs))
                    except Exception as exc:  # noqa: BLE001 - shaped into the envelope
                        return from_exception(name, exc)
            else:
                @functools.wraps(fn)
                def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
                    try:
                        return success(fn(*args, **kwargs))
                    except Exception as exc:  # noqa: BLE001 - shaped into the envelope
                        return from_exception(name, exc)

            wrapper.__signature__ = signature.replace(return_annotation=EnvelopeResult)  # type: ignore[attr-defined]
            wrapper.__annotations__ = {**fn.__annotations__, "return": EnvelopeResult}
            summary = inspect.cleandoc(fn.__doc__ or "").split("\n\n", 1)[0]  # the rest is for the reference
            self.add_tool(wrapper, name=name, title=title, description=" ".join(summary.split()),
                          annotations=_annotations(read_only, destructive, idempotent),
                          structured_output=False)  # one envelope for all, described in the instructions
            registered = self._tool_manager.get_tool(name)
            guards.take_arguments_as_sent(registered)  # "null", "{}", "[1]" stay strings
            self.declared[name] = _declared_names(registered.parameters)
            registered.parameters = lean_schema(registered.parameters)  # what tools/list shows (listing.py)
            return fn

        return decorator

    async def run_stdio_async(self) -> None:
        """Serve over stdio on pipe transports (see :mod:`mcp_server.transport`), answering every
        request read before the input ends (see :mod:`mcp_server.drain`)."""
        async with pipe_stdio() as streams:
            read_stream, write_stream = answered_before_exit(*streams, drain_seconds=self.limits.drain_seconds)
            await self._lowlevel_server.run(read_stream, write_stream,
                                            self._lowlevel_server.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None
                        ) -> Any:
        """Guard, then run a tool; every outcome but a protocol fault is an envelope result."""
        accepted = self.accepted.get(name)
        if accepted is None:  # the name is not repeated: it is the caller's text
            return failure("unknown_tool", f"there is no tool of that name; available tools: "
                                           f"{', '.join(sorted(self.accepted))}",
                           {"available": sorted(self.accepted)})
        declared = self.declared.get(name, frozenset())
        try:
            guards.check_arguments(name, arguments, accepted, declared)
        except guards.GuardError as exc:
            return failure(exc.code, str(exc), exc.details)
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                refusal = guards.describe_validation_errors(name, exc.__cause__.errors(), accepted, arguments,
                                                            declared)
                return failure(refusal.code, str(refusal), refusal.details)
            log.error("tool %s failed inside the SDK", name, exc_info=exc)
            return failure("internal_error", f"{name} failed with an internal error; the details are in the "
                                             f"server's log (stderr)")


async def _unknown_method_not_repeated(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
    """-32601 Method not found without the method name the SDK puts in ``error.data`` (it is
    the caller's text, and no error repeats what the server does not accept)."""
    try:
        return await call_next(ctx)
    except MCPError as exc:
        if exc.code == METHOD_NOT_FOUND and exc.data is not None:
            raise MCPError(METHOD_NOT_FOUND, "Method not found") from None
        raise


def _annotations(read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """The hints that say something (tools/list stays lean): readOnly only when true,
    destructive and idempotent for the tools that write (MCP: both are meaningless for read-only
    ones), idempotent only when true (MCP's default: false), openWorld false (nothing here
    reaches outside its dirs)."""
    return ToolAnnotations(read_only_hint=True if read_only else None,
                           destructive_hint=None if read_only else destructive,
                           idempotent_hint=True if idempotent and not read_only else None, open_world_hint=False)


def _declared_names(schema: Any, depth: int = 0) -> frozenset[str]:
    """Every property name declared anywhere in a JSON schema (nested objects, $defs included)."""
    if depth > 32:
        return frozenset()
    names: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                names.update(str(k) for k in value)
            names |= _declared_names(value, depth + 1)
    elif isinstance(schema, list):
        for value in schema:
            names |= _declared_names(value, depth + 1)
    return frozenset(names)
