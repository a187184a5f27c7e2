"""Caps on the work one call may ask for, checked before anything runs or is written.

Search is where a valid request turns into hours: ``sims`` rollouts per decision, every
decision of every battle. One call (a series, a benchmark) may ask for at most
:data:`MAX_SEARCH_SIMS_BATTLES` search sims x battles, one play call spend at most
:data:`MAX_ROLLOUTS_PER_CALL` rollouts; the training cost cap lives with the
trainer (``training/hyper.py``). A refusal is ``work_cap_exceeded`` naming the cap, its value,
what was asked and how to split the work.
"""

from __future__ import annotations

from adapters.search import is_search_spec, parse_search_spec

from .errors import WorkCapExceeded

# At sims=32 that is 62,500 battles (about 40 CPU-hours with greedy rollouts), at the maximum
# sims 488; a series resumes and a benchmark stops early, so larger work runs in several calls.
MAX_SEARCH_SIMS_BATTLES = 2_000_000
# Search rollouts one play call (start, submit, advance a battle) may spend before it returns
# ``paused``: about 5 decisions at the maximum sims (~15 s with greedy rollouts), a whole battle
# or more at the default sims. The browser arena's cap, the same as the MCP server's default
# ``max_rollouts_per_call`` (mcp_server/limits.py keeps its own copy to start without imports;
# tests/web pins the two equal).
MAX_ROLLOUTS_PER_CALL = 20_000


def search_sims(spec: str) -> int:
    """The sims per decision of a search spec (0 for any other spec)."""
    return parse_search_spec(spec)[1] if is_search_spec(spec) else 0


def check_search_work(asked: int, what: str, smaller: str) -> None:
    """Refuse ``asked`` search sims x battles over the cap; ``what`` says what asked for it,
    ``smaller`` how to ask for less."""
    if asked > MAX_SEARCH_SIMS_BATTLES:
        raise WorkCapExceeded(
            f"{what} asks for {asked:,} search sims x battles; one call may ask for at most MAX_SEARCH_SIMS_BATTLES = "
            f"{MAX_SEARCH_SIMS_BATTLES:,}: {smaller}",
            {"cap": "MAX_SEARCH_SIMS_BATTLES", "limit": MAX_SEARCH_SIMS_BATTLES, "asked": asked})
