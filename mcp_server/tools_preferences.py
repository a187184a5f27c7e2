"""L2 judging tools (DESIGN section 17): ``preference_task``, ``submit_preference``,
``list_preferences`` and ``preference_judges`` over the preference pools in --preferences-dir.

A thin facade over extrarlhf.preferences.pool: an MCP client judges as kind ``llm``; its
``judge`` name is stored only as a keyed pseudonym. Nothing here tells a gold task apart:
``preference_task`` shows what pool.task_view shows, and ``list_preferences`` lists the
caller's own judgments only, without task sources (``judge=``): another judge's answer would
be there to copy. Pools are made with
``python -m extrarlhf preferences pool`` (or the core's ``create_preference_pool``).
Call :func:`register` on a built server to add them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, Strict

from extrarlhf.preferences import pool as prefs
from extrarlhf.preferences import selection

if TYPE_CHECKING:
    from .app import ExtraRLHFServer

PoolName = Annotated[str, Strict(), Field(description="Pool name.")]
JudgeName = Annotated[str, Strict(), Field(min_length=1, max_length=200, description="Your name (pseudonymized).")]


def register(server: "ExtraRLHFServer") -> None:
    tool = server.envelope_tool
    where = {"preferences_dir": server.config.preferences_dir}

    @tool(title="Next task")
    def preference_task(pool: PoolName, judge: JudgeName) -> dict[str, Any]:
        """Your next task: a board and two moves, A and B.

        The acting player's view at a recorded decision point (no hidden information) and two
        candidate moves, A and B; which player proposed each is not shown. Answer with
        submit_preference (A, B, tie or skip). You are never shown the same task twice: an
        unanswered task is given again (resumed: true); task null and done: true when you have
        seen them all.
        """
        return prefs.next_task(pool, judge, "llm", **where)

    @tool(title="Judge a task")
    def submit_preference(
        pool: PoolName,
        task_id: Annotated[str, Strict(), Field(max_length=64, description="From preference_task.")],
        judge: JudgeName,
        choice: Annotated[Literal["A", "B", "tie", "skip"], Field(description="The better move.")],
        reason: Annotated[str | None, Strict(), Field(max_length=prefs.MAX_REASON_CHARS, description="Why.")] = None,
    ) -> dict[str, Any]:
        """Your answer: A, B, tie or skip; it is final.

        Records A, B, tie or skip for a task preference_task gave you, with an optional reason;
        a task you were not given is invalid_argument, a second answer already_judged.
        """
        return prefs.submit_preference(pool, task_id, judge, "llm", choice, reason, **where)

    @tool(title="List preferences", read_only=True, idempotent=True)
    def list_preferences(
        pool: PoolName,
        judge: JudgeName,
        limit: Annotated[int, Strict(), Field(ge=1, le=500, description="Page size.")] = 50,
        offset: Annotated[int, Strict(), Field(ge=0, description="Skip this many.")] = 0,
    ) -> dict[str, Any]:
        """Your judgments (paged), never another judge's.

        Yours oldest first (task, pseudonym, kind, choice, reason) from offset, up to limit,
        with next_offset and your totals; the pool's counts. No other judge's answer is shown.
        """
        return prefs.list_preferences(pool, limit=limit, offset=offset, sources=False, judge=judge, **where)

    @tool(title="Judge quality", read_only=True, idempotent=True)
    def preference_judges(pool: PoolName) -> dict[str, Any]:
        """Each judge's gold accuracy, agreement, flag.

        Per judge pseudonym: kind, judgments, skips, gold tasks answered and right with the
        Wilson 95% interval (gold_accuracy, gold_ci95), agreement with the judges it shares
        tasks with, median think time, flagged and reason; per pool Krippendorff's alpha over
        all judges and over those kept (not flagged), and the flag rules. Flagged judges are
        left out of the preference dataset.
        """
        return selection.judge_quality(pool, **where)
