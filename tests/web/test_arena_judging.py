"""Judging at the arena (issue 30): a person picks a pool, answers tasks by clicking (A, B, tie
or skip with a reason), never sees a task twice, is recorded as kind ``human`` under a keyed
pseudonym only, and every refusal is a clear page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.preferences import create_preference_pool, list_preferences
from extrarlhf.runtime.series import run_series
from extrarlhf.preferences.judges import issue_invite
from tests.web.arena_helpers import CSRF, client, same_arena

TASK = re.compile(r'name="task_id" value="([^"]+)"')


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("judging")
    run_series(root / "sessions", "g", 4, p1_model="search:baseline:greedy?sims=2", opponent="baseline:greedy", seed=4)
    materialize_v5_dataset("g", "g", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
    create_preference_pool("p", "g", n_tasks=4, datasets_dir=root / "datasets", preferences_dir=root / "preferences")
    return root


def _answer(c, html: str, choice: str, reason: str = ""):
    return c.post("/judge/p/answer", data={"csrf": CSRF.search(html).group(1), "task_id": TASK.search(html).group(1),
                                           "choice": choice, "reason": reason}, follow_redirects=False)


def test_a_person_judges_every_task_once_under_a_pseudonym(pool: Path):
    c = client(pool, preferences_dir=pool / "preferences")
    lobby = c.get("/judge").text
    assert "p — 4 tasks from g/v1" in lobby
    typed = c.post("/judge", data={"csrf": CSRF.search(lobby).group(1), "pool": "p", "name": "Grace Private"})
    assert typed.status_code == 400 and "invite link" in typed.text  # a typed name is nobody's identity
    assert c.get("/judge/invite/" + issue_invite(pool / "preferences", "Grace Private"), follow_redirects=False
                 ).headers["location"] == "/judge"
    r = c.post("/judge", data={"csrf": CSRF.search(lobby).group(1), "pool": "p"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/judge/p"
    seen, choices = [], ["A", "B", "tie", "skip"]
    for choice in choices:
        html = c.get("/judge/p").text
        assert "Which move is better?" in html and 'class="position"' in html
        assert "origin" not in html and "search:top" not in html  # blind: who proposed a move is never shown
        seen.append(TASK.search(html).group(1))
        assert c.get("/judge/p").text.count(seen[-1]) == 1  # a reload shows the same task, not a new one
        assert _answer(c, html, choice, "<b>bold</b>").status_code == 303
    assert len(set(seen)) == 4
    done = c.get("/judge/p").text
    assert 'id="done"' in done and "All judged" in done
    listed = list_preferences("p", preferences_dir=pool / "preferences")
    assert listed["judgments"] == 4 and listed["judges"] == 1 and listed["totals"]["judge_kind"] == {"human": 4}
    assert {i["choice"] for i in listed["items"]} == set(choices)
    for path in (pool / "preferences").rglob("*"):
        if path.is_file():
            assert b"Grace Private" not in path.read_bytes()
    other = same_arena(c)  # another browser, no invite: a judge of its own, who still sees every task
    page = other.get("/judge/p").text
    assert 'id="next"' in page and not TASK.search(page)  # a GET serves nothing
    other.post("/judge/p/next", data={"csrf": CSRF.search(page).group(1)})
    assert TASK.search(other.get("/judge/p").text).group(1) in seen


def test_judging_refusals_are_clear_pages(pool: Path):
    c = client(pool, preferences_dir=pool / "preferences")
    missing = c.get("/judge/nope")
    assert missing.status_code == 404 and "does not exist" in missing.text and "Traceback" not in missing.text
    c.post("/judge/p/next", data={"csrf": CSRF.search(c.get("/judge").text).group(1)})
    html = c.get("/judge/p").text
    forged = c.post("/judge/p/answer", data={"csrf": "forged", "task_id": TASK.search(html).group(1), "choice": "A"})
    assert forged.status_code == 403 and "CSRF" in forged.text
    wrong = c.post("/judge/p/answer", data={"csrf": CSRF.search(html).group(1), "task_id": "t-nope", "choice": "A"})
    assert wrong.status_code == 400 and "was not given to this judge" in wrong.text
    bad = _answer(c, html, "maybe")
    assert bad.status_code == 400 and "choice must be one of A, B, tie, skip" in bad.text
    assert _answer(c, html, "A").status_code == 303
    again = _answer(c, html, "B")
    assert again.status_code == 409 and "answered already" in again.text
    empty = client(pool / "elsewhere", preferences_dir=pool / "no-pools")
    assert 'id="no-pools"' in empty.get("/judge").text


def test_the_leaderboard_page_ranks_the_specs_of_a_pool(pool: Path):
    """Issue 54: a pool of 'A vs B' specs gets a leaderboard page (GET, read-only) linked from the lobby."""
    from extrarlhf.preferences import judge_synthetically

    create_preference_pool("ranked", "g", sources=["baseline:greedy vs baseline:random"], n_tasks=8, gold_share=0.0,
                           datasets_dir=pool / "datasets", preferences_dir=pool / "preferences")
    judge_synthetically("ranked", judges=2, sims=8, datasets_dir=pool / "datasets",
                        preferences_dir=pool / "preferences")
    c = client(pool, preferences_dir=pool / "preferences")
    lobby = c.get("/judge").text
    assert 'href="/leaderboard/ranked"' in lobby and 'href="/leaderboard/p"' not in lobby
    page = c.get("/leaderboard/ranked")
    assert page.status_code == 200 and "baseline:greedy" in page.text and "95% interval" in page.text
    served = (pool / "preferences" / "ranked" / "served.jsonl").read_bytes()
    plain = c.get("/leaderboard/p")
    assert plain.status_code == 400 and "no &#39;A vs B&#39; source" in plain.text
    assert (pool / "preferences" / "ranked" / "served.jsonl").read_bytes() == served  # GET never writes
