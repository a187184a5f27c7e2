"""The ExtraRLHF MCP server: a thin facade over the ``extrarlhf`` core (DESIGN section 8).

:func:`build_server` makes an :class:`mcp_server.app.ExtraRLHFServer` (guards, envelopes, the
long-work pool, stdio) and registers every tool on it: the battle, campaign, session and model
tools here, the dataset, training and production tools from the ``tools_*`` modules, which
take the server as an argument and never import this module. Each tool parses and checks its
arguments, calls the core and shapes the result.
"""

import bisect
import logging
import os
from typing import Annotated, Any, Callable, Literal

import anyio.to_thread
from annotated_types import Ge, Le
from mcp.server.mcpserver import Context
from pydantic import Field, Strict

from adapters import BASELINES, default_registry
from adapters.search import DEFAULT_SIMS, MAX_SIMS, is_search_spec
from engine import ACTION_SPACE_SIZE
from extrarlhf.checkpoints.promoted import read_promoted
from extrarlhf.core.errors import NotFound
from extrarlhf.policies.champion import CHAMPION_NAME, champion_summary
from extrarlhf.runtime import codenames
from extrarlhf.runtime import series as core_series
from extrarlhf.runtime.actors import concrete_spec, resolve_actor
from extrarlhf.runtime.match import MAX_SEED, Match
from extrarlhf.runtime.replay import replay_battle as core_replay

from . import guards, tools_datasets, tools_preferences, tools_production, tools_training
from .app import SERVER_NAME, ExtraRLHFServer, ServerConfig
from .cancel import run_cancellable, run_long
from .limits import Limits
from .paging import Cursor, limit_arg, paged, paginate, paginate_sorted
from .progress import progress_bridge

log = logging.getLogger("mcp_server")

# ---------------------------------------------------------------------------- argument types
MatchId = Annotated[str, Strict(), Field(description="From start_battle.")]
GroupName = Annotated[str, Strict(), Field(description="Group name.")]
Spec = Annotated[str, Strict(), Field(description="Actor spec: 'baseline:random', 'baseline:greedy', a registered "
                                                  "checkpoint name (see list_models), or the search actor over one "
                                                  "of those, 'search:<spec>?sims=N' (e.g. "
                                                  "'search:baseline:greedy?sims=64'; '&play=<spec>' plays that "
                                                  "policy's moves with the search's values recorded).")]
Codename = Annotated[str, Strict(), Field(description="Worker codename.")]
SeedArg = Annotated[int, Strict(), Ge(0), Le(MAX_SEED)]
StepView = Annotated[Literal["board", "player"], Field(
    description="'player': also the state.")]
BASELINE_SPECS = [f"baseline:{name}" for name in BASELINES]
LEASES_SHOWN = 20  # series_status shows this many of a group's leases (list_codenames pages through all)


# ---------------------------------------------------------------------------- result shaping
def _hint(match: Match) -> str:
    state = match.state
    if match.paused is not None and not state.is_terminal:
        return (f"This call stopped at its work cap (max_rollouts_per_call = {match.paused['limit']:,} search "
                f"rollouts) before the bots' moves were done: call advance_bot to let them go on.")
    if state.is_terminal:
        outcome = "a draw" if state.winner == 0 else f"won by player {state.winner}"
        return f"The battle is over ({outcome}, {state.end_reason}). Call finish_battle to write its trace."
    if match.awaiting_p1:
        return "Your move: submit_action with an action_id from these legal_actions (and a short rationale)."
    if state.to_move == 2:
        return "Player 2 (the opponent) is to move: call advance_bot."
    return "Player 1 is a model in this battle; it plays itself."


def _play_state(match_id: str, match: Match, view: str = "player") -> dict[str, Any]:
    """What the player sees: their own view, the board as text, the legal actions."""
    state = match.state
    out: dict[str, Any] = {
        "match_id": match_id, "battle_id": match.battle_id, "group": match.group, "battle_tag": match.tag,
        "p1_actor_type": match.p1_actor_type, "status": match.status,
        "turn": state.turn, "to_move": state.to_move, "your_turn": match.awaiting_p1,
        "done": state.is_terminal, "winner": state.winner, "end_reason": state.end_reason,
    }
    if view == "omniscient":
        out.update({
            "view": "omniscient", "omniscient": True,
            "warning": "OMNISCIENT VIEW: both hands and deck orders. Player 1 does not see this in play; "
                       "use it for audits and debugging, not to choose moves.",
            "board": state.render(1), "opponent_board": state.render(2), "state": match.omniscient_view(),
            "recorded": "this look is recorded in the trace (omniscient_peeks); the battle is no longer "
                        "eligible as training data",
        })
    else:
        out.update({"view": "player", "omniscient": False, "player": 1, "board": state.render(1),
                    "state": state.player_view(1)})
    return _with_next_moves(out, match)


CATALOG_ROW = ("index", "battle_id", "status", "winner", "turns", "decisions", "degraded")
CATALOG_FLAGS = ("policy_warnings", "omniscient_peeks", "codename")  # in a short row only when set


def _catalog_row(entry: dict[str, Any], battle_tag: str) -> dict[str, Any]:
    """A catalog line as inspect_session shows it by default: what an agent checks before a
    hand-off, without the seed, deck ids and sha256s (``full=true`` gives those)."""
    row = {key: entry.get(key) for key in CATALOG_ROW}
    row.update({key: entry[key] for key in CATALOG_FLAGS if entry.get(key)})
    if entry.get("battle_tag") != battle_tag:
        row["battle_tag"] = entry.get("battle_tag")
    return row


def _with_next_moves(out: dict[str, Any], match: Match, routine_hint: bool = True) -> dict[str, Any]:
    """``out`` with what the player can do next: the legal actions, ``paused`` when the call
    stopped at its work cap, and the hint (``routine_hint=False``: only when it is not simply
    player 1's move, which ``your_turn`` already says)."""
    out["legal_actions"] = match.legal_actions() if match.awaiting_p1 else []
    if match.paused is not None and not match.state.is_terminal:
        out["paused"] = {**match.paused, "cap": "max_rollouts_per_call"}
    if routine_hint or not match.awaiting_p1:
        out["next"] = _hint(match)
    return out


def _step_state(match: Match, view: str) -> dict[str, Any]:
    """What a play call's result carries by default (DESIGN 8.1: an agent pays for every
    character): the board text and the legal actions, each fact once. Left out: the match_id
    (the caller sent it), to_move (``your_turn`` and the board's first line say it), the routine
    "your move" hint (the server instructions give it once); ``view="player"`` adds the
    structured state, and get_state gives everything at any time."""
    state = match.state
    out: dict[str, Any] = {"turn": state.turn, "your_turn": match.awaiting_p1, "done": state.is_terminal,
                           "winner": state.winner}
    if state.is_terminal:
        out["end_reason"] = state.end_reason
    out["board"] = state.render(1)
    if view == "player":
        out["state"] = state.player_view(1)
    return _with_next_moves(out, match, routine_hint=False)


def _move_lists(moves: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The bots' moves of a call as their descriptions (from the mover's side), the opponent's
    as ``opponent_moves`` and, in a battle player 1's model plays, player 1's as ``p1_moves``.
    A bot sends no rationale and its action ids are its own, so the description is the move."""
    out = {"opponent_moves": [move["description"] for move in moves if move["player"] == 2]}
    mine = [move["description"] for move in moves if move["player"] == 1]
    if mine:
        out["p1_moves"] = mine
    return out


# ---------------------------------------------------------------------------- tools
def build_server(sessions_dir: str | os.PathLike[str] = "sessions", datasets_dir: str | os.PathLike[str] = "datasets",
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                 limits: Limits | None = None, preferences_dir: str | os.PathLike[str] = "preferences"
                 ) -> ExtraRLHFServer:
    """The server with every tool registered, over the given directories, within ``limits``."""
    config = ServerConfig.from_dirs(sessions_dir, datasets_dir, checkpoints_dir, preferences_dir)
    server = ExtraRLHFServer(config, limits)
    store, matches, checkpoints = server.store, server.matches, server.checkpoints
    tool = server.envelope_tool

    @tool(title="Ping", read_only=True, idempotent=True)
    def ping() -> dict[str, Any]:
        """Health check: the server name and version."""
        return {"pong": True, "server": SERVER_NAME, "version": server.version}

    # ------------------------------------------------------------------ L2: one battle
    async def play(tool_name: str, searching: bool, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A play call: with a search actor in the battle it is long work (bounded, cancellable,
        at most max_rollouts_per_call rollouts); otherwise a quick call in the SDK's threads."""
        if searching:
            return await run_long(tool_name, fn, max_rollouts=server.limits.max_rollouts_per_call)
        return await anyio.to_thread.run_sync(fn)

    @tool(title="Start a battle")
    async def start_battle(
        p1_actor_type: Annotated[Literal["human", "llm", "rl"], Field(
            description="'llm' or 'human': you submit the moves; 'rl': p1_model plays.")],
        opponent: Annotated[str, Strict(), Field(description="Player 2's spec (see list_models).")]
        = "baseline:greedy",
        p1_model: Annotated[str | None, Strict(), Field(description="Player 1's spec, for p1_actor_type 'rl'.")] = None,
        group: Annotated[str | None, Strict(),
                         Field(description="Default 'interactive'.")] = None,
        seed: Annotated[SeedArg | None,
                        Field(description="Default: from group and index.")] = None,
        codename: Annotated[str | None, Strict(), Field(description="Recorded in the trace.")]
        = None,
        view: StepView = "board",
    ) -> dict[str, Any]:
        """Play player 1 against a bot or model: match_id, the board, your legal actions.

        Start a battle in which you play player 1 against a bot or model.

        Returns match_id (use it in every later call), the battle's facts once (battle_id, group,
        battle_tag, opponent, and p1_model and codename when set), turn, your_turn, done and winner
        (null while running; 0 draw, 1 you, 2 the opponent), a readable `board`, `legal_actions`
        [{action_id, description}] and the opponent's opening moves (their descriptions, from its
        side) if it started; view='player' adds your structured view of the state (`state`). For
        p1_actor_type 'rl' the battle plays itself to the end at once: call finish_battle to record
        it. A call spends a bounded number of search rollouts (20,000 by default): past that it
        returns with `paused` (call advance_bot to go on).
        """
        def start() -> dict[str, Any]:
            match_id, match = matches.start(p1_actor_type, opponent, p1_model, group, seed, codename)
            with matches.use(match_id) as m:
                out: dict[str, Any] = {"match_id": match_id, "battle_id": m.battle_id, "group": m.group,
                                       "battle_tag": m.tag, "opponent": m.actors[2]["spec"]}
                out.update({key: value for key, value in (("p1_model", m.actors[1]["spec"]),
                                                          ("codename", m.codename)) if value is not None})
                out.update(_step_state(m, view))
                out["opponent_moves"] = _move_lists(m.moves_since(0))["opponent_moves"] \
                    if p1_actor_type != "rl" else []
                return out

        return await play("start_battle", is_search_spec(opponent) or is_search_spec(p1_model), start)

    @tool(title="Battle state", read_only=True, idempotent=True)
    def get_state(
        match_id: MatchId,
        view: Annotated[Literal["player", "omniscient"], Field(
            description="'player' (what you may know) or 'omniscient' (audits only; recorded).")] = "player",
    ) -> dict[str, Any]:
        """A live battle's board, legal actions and done/winner.

        The current state of a live battle: your view, the board as text, legal actions, done/winner.

        Use view='omniscient' only for audits; it reveals the opponent's hand and both decks, and
        looking at it during a battle is recorded and makes the battle ineligible for training.
        """
        with matches.use(match_id) as m:
            return _play_state(match_id, m, view)

    @tool(title="Legal actions", read_only=True, idempotent=True)
    def legal_actions(match_id: MatchId) -> dict[str, Any]:
        """Player 1's legal action ids, described (they change each move).

        The actions player 1 may take now: actions [{action_id, description}] (empty when it is not
        your turn or the battle is over), with your_turn, done and winner.
        """
        with matches.use(match_id) as m:
            your_turn = m.awaiting_p1
            return {"match_id": match_id, "turn": m.state.turn, "to_move": m.state.to_move, "your_turn": your_turn,
                    "done": m.done, "winner": m.state.winner,
                    "actions": m.legal_actions() if your_turn else [], "next": _hint(m)}

    @tool(title="Play a move", destructive=False)
    async def submit_action(
        match_id: MatchId,
        action_id: Annotated[int, Strict(), Ge(0), Le(ACTION_SPACE_SIZE - 1),
                             Field(description="From the latest legal_actions (0 is End turn).")],
        rationale: Annotated[str | None, Strict(), Field(
            description="Why this move, briefly (training signal).")] = None,
        view: StepView = "board",
    ) -> dict[str, Any]:
        """Play your move (action_id, rationale); bots then move until your turn or the end.

        Play player 1's move. The opponent then moves automatically until it is your turn again
        or the battle ends. Returns the opponent's moves (their descriptions, from its side), the
        board and the next legal actions (view='player' adds the structured state); done/winner
        once the battle is over (then call finish_battle).

        Errors: illegal_action (the message gives the reason and the legal ids), not_your_turn,
        match_finished.
        """
        def submit() -> dict[str, Any]:
            with matches.use(match_id) as m:
                start = m.decision_count
                m.submit(action_id, rationale)
                return {**_step_state(m, view), **_move_lists(m.moves_since(start + 1))}  # after your own

        return await play("submit_action", matches.searching(match_id), submit)

    @tool(title="Let the bots move")
    async def advance_bot(match_id: MatchId, view: StepView = "board") -> dict[str, Any]:
        """Let bots move until your turn or the end (player 2 to move, or after `paused`).

        Let the bot/model players move until player 1 must decide or the battle ends (submit_action
        already does this; use it if the state says player 2 is to move, or a call returned
        `paused` at its work cap). Returns the bots' moves, the board and the legal actions.
        """
        def advance() -> dict[str, Any]:
            with matches.use(match_id) as m:
                start = m.decision_count
                m.advance()
                return {**_step_state(m, view), **_move_lists(m.moves_since(start))}

        return await play("advance_bot", matches.searching(match_id), advance)

    @tool(title="Finish a battle")
    def finish_battle(match_id: MatchId) -> dict[str, Any]:
        """Write a finished battle's trace (done=true) and retire its match_id.

        Record a battle that is over (done=true): writes its V5 trace (meta, turns, actions) and
        catalog line. Returns paths, result {status, winner, reason, turns, decisions}, degraded and
        policy_warnings. The match_id is then retired. A battle not over yet: play on or abandon it.
        """
        with matches.use(match_id) as m:
            result = m.finish()
        return {"match_id": match_id, **result,
                "result": {k: result[k] for k in ("status", "winner", "reason", "turns", "decisions")}}

    @tool(title="Abandon a battle", destructive=True)
    def abandon_battle(
        match_id: MatchId,
        reason: Annotated[str, Strict(), Field(description="Why (recorded in the trace).")] = "abandoned by the caller",
    ) -> dict[str, Any]:
        """Stop a live battle; its trace is kept, marked abandoned.

        Stop a live battle early. Its trace is written and marked abandoned (never training-ready);
        the match_id is retired. Returns paths and the result like finish_battle.
        """
        with matches.use(match_id) as m:
            result = m.abandon(reason)
        return {"match_id": match_id, **result,
                "result": {k: result[k] for k in ("status", "winner", "reason", "turns", "decisions")}}

    @tool(title="List live matches", read_only=True, idempotent=True)
    def list_matches(limit: limit_arg(100, "matches") = 100, cursor: Cursor = None) -> dict[str, Any]:
        """The live matches of this server process (ids).

        The live (not yet finished or abandoned) matches of this server process: match_id, battle_id,
        group, battle_tag, turn, to_move, done. Matches never cross server processes. Paged by
        match_id: total, returned, next_cursor (pass it as cursor for the next page).
        """
        page = paginate(matches.list(), tool="list_matches", limit=limit, cursor=cursor,
                        key=lambda m: (m["match_id"],))
        return {**paged({}, "matches", page), "count": len(page.items)}

    # ------------------------------------------------------------------ L1: campaigns
    @tool(title="Run a series")
    async def run_series(
        group: GroupName,
        n_battles: Annotated[int, Strict(), Ge(1), Le(core_series.MAX_BATTLES),
                             Field(description="Battles the group should hold.")],
        p1_model: Annotated[str, Strict(), Field(description="Player 1's spec (see list_models).")],
        opponent: Annotated[str, Strict(), Field(description="Player 2's spec.")],
        ctx: Context,
        seed: Annotated[SeedArg, Field(description="Base seed; battle i's seed derives from it.")] = 0,
        max_workers: Annotated[int, Strict(), Ge(1), Le(core_series.MAX_WORKERS),
                               Field(description="Worker processes.")] = 1,
        codename: Annotated[str | None, Strict(),
                            Field(description="Codename claimed for the series' duration.")] = None,
    ) -> dict[str, Any]:
        """Run or resume a series of auto-played battles (p1_model vs opponent) in a group.

        Run (or resume) an L1 series: n_battles rl battles (p1_model vs opponent) into `group`,
        on bounded workers, sending MCP progress notifications as battles finish. Blocks until
        done; releases its codename; returns ran/skipped counts and the group summary (results,
        degraded count, readiness).
        """
        progress = progress_bridge(ctx, "run_series", "battles played")
        result = await run_cancellable(
            core_series.run_series, config.sessions_dir, group, n_battles, p1_model=p1_model, opponent=opponent,
            seed=seed, max_workers=max_workers, codename=codename, progress=progress,
            checkpoints_dir=config.checkpoints_dir)
        result["codename_released"] = bool(codename)
        return result

    @tool(title="Series status", read_only=True, idempotent=True)
    def series_status(group: GroupName) -> dict[str, Any]:
        """A group's progress: battles by status, results, readiness, leases.

        How far a group is: target battles (series), battles by status (finished, abandoned,
        crashed, unfinished), results, degraded count, readiness, and the live codename leases
        working on it (the first 20 by codename; leases_total counts them all and
        list_codenames pages through every lease). running/owner: whether a series (or a repair)
        owns the group right now, and who (pid, host, codename, since, heartbeat). Computed fresh
        from the catalog, so it is safe to poll during run_series.
        """
        manifest = store.read_manifest(group)
        summary = store.compute_summary(group)
        seeds = manifest["seeds"]
        target = seeds.get("n_battles")
        final = sum(summary["by_status"].get(s, 0) for s in ("finished", "abandoned", "crashed"))
        leases = [lease for lease in codenames.list_leases(config.sessions_dir) if lease["group"] == group]
        from extrarlhf.runtime.ownership import current_owner

        owner = current_owner(store, group)  # the running series (or repair) that owns the group, if any
        return {"group": group, "mode": seeds["mode"], "target_battles": target,
                "complete": (final >= target) if target else None, "final_battles": final,
                "configuration": manifest["configuration"], "codename": manifest.get("codename"),
                "running": owner is not None, "owner": owner,
                "leases": leases[:LEASES_SHOWN], "leases_total": len(leases), "summary": summary}

    @tool(title="Claim a codename")
    def claim_codename(
        codename: Codename,
        group: GroupName,
        stale_after_s: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False, description=(
            "Seconds without heartbeat before reaping."))]
        = codenames.DEFAULT_STALE_AFTER_S,
    ) -> dict[str, Any]:
        """Claim (or refresh) a worker codename for a group.

        Claim a worker codename for a group (a lease in agents_index.json held by this server
        process). Claiming again for the same group refreshes its heartbeat. Fails with
        codename_taken if another live owner holds it. run_series with this codename reuses the
        claim and releases it at the end.
        """
        lease = codenames.claim(config.sessions_dir, codename, group, stale_after_s=stale_after_s)
        return {"lease": lease}

    @tool(title="Release a codename", idempotent=True)
    def release_codename(codename: Codename) -> dict[str, Any]:
        """Release a codename this server process holds.

        Release a codename this server holds. released=false when it was not claimed (or had been
        reaped); not_owner when another process holds it.
        """
        return {"codename": codename, "released": codenames.release(config.sessions_dir, codename)}

    @tool(title="List codename leases", read_only=True, idempotent=True)
    def list_codenames(limit: limit_arg(100, "leases") = 100, cursor: Cursor = None) -> dict[str, Any]:
        """The live codename leases (stale ones reaped first).

        The live codename leases (dead or stale ones are reaped first): codename, group, owner pid and
        host, claimed/heartbeat times. Paged by codename: total, returned, next_cursor.
        """
        page = paginate(codenames.list_leases(config.sessions_dir), tool="list_codenames", limit=limit,
                        cursor=cursor, key=lambda lease: (lease["codename"],))
        return {**paged({}, "leases", page), "count": len(page.items)}

    # ------------------------------------------------------------------ sessions
    def group_row(name: str) -> dict[str, Any]:
        from extrarlhf.core.errors import RLHFError

        try:
            manifest = store.read_manifest(name)
            summary = store.read_summary(name)
            conf = manifest["configuration"]
            return {"group": name, "created_at": manifest["created_at"], "battle_tag": conf["battle_tag"],
                    "p1_actor_type": conf["p1_actor_type"], "opponent": conf["opponent"]["spec"],
                    "p1_model": (conf.get("p1_model") or {}).get("spec"), "mode": manifest["seeds"]["mode"],
                    "codename": manifest.get("codename"), "battles": summary["battles"],
                    "by_status": summary["by_status"], "results": summary["results"],
                    "degraded": summary["degraded"],
                    "v5_policy_training_ready": summary["readiness"]["v5_policy_training_ready"]}
        except Exception as exc:  # noqa: BLE001 - one unreadable group does not hide the others
            if not isinstance(exc, RLHFError):
                log.error("list_sessions: group %s could not be read", name, exc_info=exc)
            code = exc.code if isinstance(exc, RLHFError) else "internal_error"
            message = str(exc) if isinstance(exc, RLHFError) else \
                f"the group could not be read ({type(exc).__name__}); the details are in the server's log (stderr)"
            return {"group": name, "error": {"code": code, "message": message,
                                             "details": getattr(exc, "details", None)}}

    @tool(title="List session groups", read_only=True, idempotent=True)
    def list_sessions(limit: limit_arg(50, "groups") = 50, cursor: Cursor = None) -> dict[str, Any]:
        """The session groups: configuration and headline numbers.

        The session groups under the sessions directory with their configuration and headline
        numbers (battles by status, results, degraded, v5 training readiness). A group that cannot
        be read is listed as {group, error: {code, message, details}} (e.g. corrupt_record with the
        file, line and field; path_outside_sessions_dir for a symlinked group) and the others are
        still listed. Paged by group name: total, returned, next_cursor (pass it as cursor for the
        next page).
        """
        page = paginate(store.list_groups(), tool="list_sessions", limit=limit, cursor=cursor,
                        key=lambda name: (name,), render=group_row)
        return {"sessions_dir": str(config.sessions_dir), **paged({}, "groups", page), "count": len(page.items)}

    @tool(title="Inspect a session group", read_only=True, idempotent=True)
    def inspect_session(
        group: GroupName,
        limit: limit_arg(10, "catalog entries") = 10,
        cursor: Cursor = None,
        full: Annotated[bool, Strict(), Field(description="Whole catalog lines, sha256s included.")] = False,
    ) -> dict[str, Any]:
        """One group: its manifest, summary and a page of its catalog.

        A group's manifest (configuration, versions, seeds), its summary recomputed from the
        catalog, and a page of the catalog by battle index: one entry per battle with index,
        battle_id, status, winner, turns, decisions and degraded, plus policy_warnings,
        omniscient_peeks, codename and battle_tag only when set or different from the group's;
        full=true gives the whole catalog lines (seed, battle_tag, codename, deck_ids,
        weights_hashes, the sha256 of each trace file). Paged: total (= catalog_total), returned,
        next_cursor (pass it as cursor for the next page). A damaged catalog
        line, manifest or summary is refused with corrupt_record naming the file, line and field
        (error.details); nothing past it is shown.
        """
        manifest = store.read_manifest(group)
        tag = manifest["configuration"]["battle_tag"]
        # the catalog's index (or its fold without the entries); a page's entries read in one pass
        view = store.catalog_view(group)
        shown: dict[str, dict[str, Any]] = {}

        def render(key: tuple[int, str]) -> dict[str, Any]:
            if key[1] not in shown:  # the first item of the page: fetch it and the rest of the page
                at = bisect.bisect_left(view.keys, key)
                shown.update(view.entries(at, at + limit))
            entry = shown[key[1]]
            return entry if full else _catalog_row(entry, tag)

        page = paginate_sorted(view.keys, tool="inspect_session", limit=limit, cursor=cursor, scope=group,
                               render=render)
        return {"group": group, "path": str(store.group_dir(group)), "manifest": manifest,
                "summary": store.compute_summary(group), **paged({}, "catalog", page), "catalog_total": page.total}

    @tool(title="Replay a recorded battle", read_only=True, idempotent=True)
    def replay_battle(
        group: GroupName,
        battle_id: Annotated[str, Strict(), Field(description="From the group's catalog (inspect_session).")],
    ) -> dict[str, Any]:
        """Re-run a recorded battle checking every state hash: reproduces, or where it diverges.

        Re-run a recorded battle from its trace and check every state hash: reproduces=true, or the
        first divergence (decision index and field).
        """
        return core_replay(store, group, battle_id)

    # ------------------------------------------------------------------ models
    @tool(title="List models", read_only=True, idempotent=True)
    def list_models(limit: limit_arg(50, "checkpoints") = 50, cursor: Cursor = None) -> dict[str, Any]:
        """What can play: baselines, checkpoints, the search spec form.

        What can play: the baseline specs, a page of the registered checkpoints (name, kind,
        weights_hash, path...), `champion` first, `specs` (the valid opponent / p1_model values:
        champion, the baselines, the page's names), `search` (the search actor's spec form over any
        of them, its default and maximum sims, an example) and the adapter kinds with their
        aliases. Paged: total (checkpoints), returned, next_cursor (pass it as cursor).
        """
        registry = default_registry()
        page = paginate(checkpoints.list(), tool="list_models", limit=limit, cursor=cursor,
                        key=lambda entry: (int(entry["name"] != CHAMPION_NAME), entry["name"]))
        promoted = read_promoted(config.checkpoints_dir)
        names = [entry["name"] for entry in page.items]
        first = [CHAMPION_NAME] if CHAMPION_NAME in names else []
        return {"baselines": BASELINE_SPECS, **paged({}, "checkpoints", page),
                "specs": first + BASELINE_SPECS + [n for n in names if n not in first]
                + (["@promoted"] if promoted else []),
                "champion": champion_summary(config.checkpoints_dir) if first else None,
                "promoted": promoted["name"] if promoted else None,
                "search": {"form": "search:<baseline spec or checkpoint name>?sims=N[&play=<baseline spec or "
                                   "checkpoint name>]",
                           "default_sims": DEFAULT_SIMS, "max_sims": MAX_SIMS,
                           "example": f"search:baseline:greedy?sims={DEFAULT_SIMS}",
                           "description": "decision-time search over the acting player's information set, "
                                          "rolling out with the named policy (inspect_model describes one); with "
                                          "play=, the play policy's moves are played and the search only labels "
                                          "them (its values and choice are recorded: DAgger data)"},
                "checkpoints_dir": str(config.checkpoints_dir), "adapter_kinds": registry.kinds(),
                "kind_aliases": dict(registry.aliases)}

    @tool(title="Register an ONNX checkpoint")
    def register_checkpoint(
        name: Annotated[str, Strict(), Field(description="Checkpoint name (its spec).")],
        path: Annotated[str, Strict(), Field(description="The .onnx file, in the checkpoints or datasets dir.")],
        kind: Annotated[Literal["legacy_onnx", "action_onnx", "v4", "v5"] | None, Field(
            description="Default: detected from the ONNX signature.")] = None,
        overwrite: Annotated[bool, Strict(), Field(description="Replace an existing checkpoint of that "
                                                               "name.")] = False,
    ) -> dict[str, Any]:
        """Register an ONNX file as a named checkpoint (kind checked).

        Register an ONNX model as a named checkpoint: its kind is detected or checked, its
        weights_hash recorded, and a copy stored in the checkpoints directory. Returns the entry.
        """
        source = guards.confine_path(path, [config.checkpoints_dir, config.datasets_dir], "path")
        return checkpoints.register(name, source, kind, overwrite=overwrite).as_dict()

    @tool(title="Register a custom adapter kind")
    def register_custom_model(
        kind: Annotated[str, Strict(), Field(description="New adapter kind (lowercase, 1-32).")],
        factory: Annotated[str, Strict(), Field(description="Factory import path, 'package.module:attr'.")],
        replace: Annotated[bool, Strict(), Field(description="Replace an existing kind of that name.")] = False,
    ) -> dict[str, Any]:
        """Add an adapter kind from a 'package.module:attr' factory (this process only).

        Add an adapter kind backed by a factory 'package.module:attr' (imported now, so a bad path
        is refused here). The kind lives in this server process only (not persisted).
        """
        registry = default_registry()
        registry.register(kind, factory, replace=replace)
        return {"kind": kind, "factory": factory, "persisted": False, "adapter_kinds": registry.kinds()}

    @tool(title="Inspect a model", read_only=True, idempotent=True)
    def inspect_model(
        name: Annotated[str, Strict(), Field(description="A baseline, checkpoint or search spec."
                                                         )],
    ) -> dict[str, Any]:
        """A baseline, checkpoint or search spec: kind, signature, weights_hash, file intact.

        Details of a model: for a checkpoint its kind, IO signature, weights_hash, file and whether
        the stored file is present and intact; for a baseline its kind; for a search spec its
        canonical spec, sims and rollout policy (with that policy's own details).
        """
        return describe_model(name)

    def describe_model(name: str) -> dict[str, Any]:
        if is_search_spec(name):
            actor = resolve_actor(name, "name", config.checkpoints_dir)
            described = {"name": name, **actor.as_dict(), "sims": actor.sims,
                         "rollout": describe_model(actor.rollout.spec),
                         "description": "decision-time search over the acting player's information set "
                                        f"({actor.sims} rollouts per decision with {actor.rollout.spec})"}
            if actor.guide is not None:
                described["description"] = ("decision-time search over the acting player's information set guided "
                                            f"by {actor.rollout.spec} ({actor.sims} simulations per decision: its "
                                            f"policy as the prior, leaves scored by guide={actor.guide} after "
                                            f"{actor.turns} turns of greedy)")
            if actor.play is not None:
                described["play"] = describe_model(actor.play.spec)
                described["description"] += (f"; labels {actor.play.spec}'s battles: {actor.play.spec}'s moves are "
                                             f"played, the search's values and choice recorded (DAgger)")
            return described
        name = concrete_spec(name, "name", config.checkpoints_dir)  # @promoted -> the promoted checkpoint
        if name in BASELINE_SPECS:
            return {"name": name, "spec": name, "kind": "baseline", "weights_hash": None,
                    "description": "built-in heuristic baseline (no weights)"}
        if name not in checkpoints.specs():
            known = ", ".join(BASELINE_SPECS + checkpoints.specs()
                              + ["search:<one of these>?sims=N[&play=<one of these>]"])
            raise NotFound(f"unknown model {name!r}; known: {known}")
        return {"spec": name, **checkpoints.inspect(name)}

    tools_datasets.register(server)
    tools_training.register(server)
    tools_production.register(server)
    tools_preferences.register(server)
    return server
