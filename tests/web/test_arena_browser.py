"""The arena in a real browser: the system Chromium driven by Playwright (from PyPI, no browser
download) against the real server (``python -m extrarlhf arena`` on a free port, stopped in a
finally). A whole battle by clicking the highlighted moves, with screenshots at its start,
middle and end (kept under ``RLHF_SCREENSHOT_DIR`` when set), whose trace validates, replays and
materializes like an MCP-played one; a battle by the keyboard alone (Tab and Enter); and a
390x844 phone viewport without horizontal scrolling; and judging preference tasks by clicking. Skipped with the reason when
/usr/bin/chromium is missing, unless ``RLHF_REQUIRE_CHROMIUM`` is set."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import pytest

from extrarlhf.datasets.materialize import materialize_v5_dataset
from extrarlhf.datasets.validate import validate_dataset
from extrarlhf.preferences import create_preference_pool, list_preferences
from extrarlhf.preferences.gold import read_gold
from extrarlhf.preferences.judges import issue_invite
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.sessions import SessionStore
from tests.servers import free_port, wait_http
from tests.test_schemas import errors as schema_errors
from tests.web.arena_helpers import mcp_trace, trace_files

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
NO_HSCROLL = "document.scrollingElement.scrollWidth <= window.innerWidth"
AXE = REPO / ".tools" / "node_modules" / "axe-core" / "axe.min.js"  # make tools installs it from npm
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

if not CHROMIUM.exists():
    if os.environ.get("RLHF_REQUIRE_CHROMIUM"):
        raise RuntimeError("RLHF_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing (make chromium installs it)")
    pytest.skip("no /usr/bin/chromium: install the Debian package 'chromium' (make test's chromium target does) "
                "for the arena's browser tests", allow_module_level=True)

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402 - only when Chromium is there


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("arena")


@pytest.fixture(scope="module")
def shots(work: Path) -> Path:
    folder = Path(os.environ.get("RLHF_SCREENSHOT_DIR") or work / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server(work: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "extrarlhf", "arena", "--port", str(port), "--sessions-dir",
                             str(work / "sessions"), "--checkpoints-dir", str(work / "checkpoints"),
                             "--preferences-dir", str(work / "preferences")],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/", [proc], "the arena", lambda: proc.stderr.read().decode()[-2000:]
                  if proc.poll() is not None else "(still running)", timeout=90, every=0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _click_to_the_end(page: Page, on_card: bool = True, each: Any = None) -> int:
    """Click the highlighted moves (the first on a card, else End turn) until the end page."""
    for n in range(1000):
        if page.locator("#result").count():
            return n
        if each is not None:
            each(n)
        buttons = page.locator(".card button.act")
        target = buttons.first if on_card and buttons.count() else page.locator("button.endturn")
        with page.expect_navigation():
            target.click()
    raise AssertionError("battle not over after 1000 moves")


def _start(page: Page, url: str, opponent: str, name: str | None = None, group: str | None = None) -> None:
    page.goto(url + "/")
    page.select_option("#opponent", opponent)
    for field, value in (("#name", name), ("#group", group)):
        if value:
            page.fill(field, value)
    with page.expect_navigation():
        page.click("text=Start the battle")
    assert page.locator("#play").count() == 1


def test_a_whole_battle_by_clicking_validates_replays_and_materializes_like_mcp(server: str, browser: Browser,
                                                                              work: Path, shots: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _start(page, server, "baseline:greedy", name="Bob")
    assert page.locator(".hero").count() == 2 and page.locator(".handcard").count() >= 3
    assert page.locator(".backs .back").count() >= 3  # the opponent's hand: card backs only
    page.screenshot(path=str(shots / "arena-start.png"), full_page=True)

    def middle(n: int) -> None:
        if n == 12:
            page.screenshot(path=str(shots / "arena-middle.png"), full_page=True)

    moves = _click_to_the_end(page, each=middle)
    assert moves > 12
    assert page.locator("#result h1").inner_text() in ("You won!", "You lost", "Draw")
    page.screenshot(path=str(shots / "arena-end.png"), full_page=True)
    with page.expect_navigation():
        page.click("text=Watch the replay")
    assert "step 1 of" in page.content()
    with page.expect_navigation():
        page.click("a[rel=next]")
    assert "step 2 of" in page.content() and page.locator(".handcard").count() > 4  # both hands, after the end
    page.screenshot(path=str(shots / "arena-replay.png"), full_page=True)
    page.close()

    sessions = work / "sessions"
    arena = trace_files(sessions, "arena-baseline-greedy")
    (meta,) = arena["meta"]
    assert meta["actors"]["p1"]["type"] == "human" and meta["battle_tag"] == "human-vs-bot"
    assert schema_errors("meta", meta) == [] and all(schema_errors("action", a) == [] for a in arena["actions"])
    assert len(meta["audit"]["think_times"]["decisions"]) == moves
    assert replay_battle(SessionStore(sessions), "arena-baseline-greedy", meta["battle_id"])["reproduces"] is True
    mcp = mcp_trace(work / "mcp-sessions")
    for name in ("meta", "actions", "turns"):
        assert set(arena[name][0]) == set(mcp[name][0]), name
    assert set(arena["actions"][0]["actor"]) == set(mcp["actions"][0]["actor"])
    tables = {}
    for label, where, group in (("arena", sessions, "arena-baseline-greedy"),
                                ("mcp", work / "mcp-sessions", "mcp-human")):
        done = materialize_v5_dataset([group], f"{label}-ds", sessions_dir=where, datasets_dir=work / "datasets")
        assert validate_dataset(f"{label}-ds", datasets_dir=work / "datasets")["valid"] is True
        folder = Path(done["path"])
        tables[label] = {p.relative_to(folder).as_posix(): pq.read_schema(p) for p in sorted(folder.rglob("*.parquet"))}
        assert done["row_counts"]["decisions"] > 0
    assert tables["arena"].keys() == tables["mcp"].keys()
    for name, schema in tables["arena"].items():
        assert schema.remove_metadata() == tables["mcp"][name].remove_metadata(), name


def test_a_battle_by_the_keyboard_alone(server: str, browser: Browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server + "/")

    def tab_to(test: str) -> None:
        for _ in range(200):
            page.keyboard.press("Tab")
            if page.evaluate(f"(() => {{ const e = document.activeElement; return !!e && ({test}); }})()"):
                return
        raise AssertionError(f"Tab never reached {test}")

    tab_to("e.textContent.trim() === 'Start the battle'")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    moves = 0
    while not page.locator("#result").count():
        playable = page.locator(".card button.act").count() > 0
        tab_to("e.matches('.card button.act')" if playable else "e.matches('button.endturn')")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        moves += 1
        assert moves < 1000
    assert moves > 3 and page.locator("#result h1").inner_text() in ("You won!", "You lost", "Draw")
    page.close()


def test_a_phone_sized_viewport_never_scrolls_sideways(server: str, browser: Browser, shots: Path):
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    try:
        page.goto(server + "/")
        assert page.evaluate(NO_HSCROLL)
        _start(page, server, "baseline:greedy", group="arena-phone")
        assert page.evaluate(NO_HSCROLL)
        page.screenshot(path=str(shots / "arena-phone.png"), full_page=True)

        def check(n: int) -> None:
            assert page.evaluate(NO_HSCROLL), n

        _click_to_the_end(page, each=check)
        assert page.evaluate(NO_HSCROLL)
        page.screenshot(path=str(shots / "arena-phone-end.png"), full_page=True)
        with page.expect_navigation():
            page.click("text=Watch the replay")
        assert page.evaluate(NO_HSCROLL)
    finally:
        context.close()


def test_judging_preference_tasks_by_clicking(server: str, browser: Browser, work: Path, shots: Path):
    run_series(work / "judged-sessions", "judged", 3, p1_model="search:baseline:greedy?sims=2",
               opponent="baseline:greedy", seed=9)
    materialize_v5_dataset("judged", "judged", sessions_dir=work / "judged-sessions", datasets_dir=work / "datasets")
    create_preference_pool("clicks", "judged", n_tasks=3, datasets_dir=work / "datasets",
                           preferences_dir=work / "preferences")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(server + "/")
        with page.expect_navigation():
            page.click("#to-judging")
        assert "invite link" in page.inner_text("main")  # not invited yet: judging as this browser
        page.goto(server + "/judge/invite/" + issue_invite(work / "preferences", "Browser Judge"))
        assert page.url == server + "/judge" and "the person your invite link names" in page.inner_text("main")
        page.select_option("#pool", "clicks")
        with page.expect_navigation():
            page.click("text=Start judging")
        page.screenshot(path=str(shots / "judge-task.png"), full_page=True)
        for button in ("#choose-a", "#choose-b", "#choose-tie"):
            assert page.locator("pre.position").is_visible() and "your board" in page.inner_text("pre.position")
            page.fill("#reason", f"clicked {button}")
            with page.expect_navigation():
                page.click(button)
        assert page.locator("#done").is_visible()
        page.screenshot(path=str(shots / "judge-done.png"), full_page=True)
    finally:
        page.close()
    listed = list_preferences("clicks", preferences_dir=work / "preferences")
    assert [i["choice"] for i in listed["items"]] == ["A", "B", "tie"]
    assert listed["totals"]["judge_kind"] == {"human": 3} and listed["items"][0]["reason"] == "clicked #choose-a"
    invited = issue_invite(work / "preferences", "Browser Judge").split(".")[1]
    assert {i["judge"] for i in listed["items"]} == {invited}  # the invite's pseudonym, not the browser's


def _normalized(page: Page) -> str:
    """The judging page's HTML with what differs from task to task cut out: the board, the two
    moves, the task id, the CSRF token and every number."""
    html = page.content()
    html = re.sub(r'(<pre class="position"[^>]*>).*?(</pre>)', r"\1\2", html, flags=re.S)
    html = re.sub(r'(<span class="tag">[AB]</span>)[^<]*(</button>)', r"\1\2", html)
    html = re.sub(r'(name="(?:task_id|csrf)" value=")[^"]*"', r'\1"', html)
    return re.sub(r"\d+", "0", html)


def test_a_gold_task_page_is_the_same_as_any_other(server: str, browser: Browser, work: Path):
    """Issue 54: nothing in the judging page's HTML, scripts or reply headers tells a gold task apart."""
    run_series(work / "gold-sessions", "goldj", 10, p1_model="search:baseline:greedy?sims=2",
               opponent="baseline:greedy", seed=2)
    materialize_v5_dataset("goldj", "goldj", sessions_dir=work / "gold-sessions", datasets_dir=work / "datasets")
    assert create_preference_pool("goldpool", "goldj", n_tasks=16, gold_share=0.5, datasets_dir=work / "datasets",
                                  preferences_dir=work / "preferences")["gold"] >= 2
    gold = read_gold(work / "preferences" / "goldpool")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen: dict[bool, set] = {True: set(), False: set()}
    try:
        page.goto(server + "/judge")
        page.select_option("#pool", "goldpool")
        with page.expect_navigation() as nav:
            page.click("text=Start judging")
        for _ in range(8):  # two of a judge's first eight tasks are gold
            reply = nav.value
            task_id = page.locator('input[name="task_id"]').get_attribute("value")
            headers = tuple(sorted((k, v) for k, v in reply.all_headers().items()
                                   if k not in ("date", "set-cookie", "content-length")))
            scripts = tuple(page.eval_on_selector_all("script", "s => s.map(x => x.src + x.text)"))
            seen[task_id in gold].add((_normalized(page), scripts, headers))
            with page.expect_navigation() as nav:
                page.click("#choose-a")
    finally:
        page.close()
    assert seen[True] and seen[False] and seen[True] == seen[False]
    html = next(iter(seen[True]))[0]
    assert "Which move is better?" in html and 'id="choose-a"' in html and "<pre" in html


def _axe(page: Page, where: str) -> None:
    """axe-core's WCAG 2.1 A/AA rules on the page as shown: no violation (each listed with its nodes)."""
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate("""async tags => (await axe.run(document, {runOnly: {type: 'tag', values: tags}}))
        .violations.map(v => v.id + ': ' + v.nodes.map(n => n.html.slice(0, 100)).join(' | '))""", AXE_TAGS)
    assert violations == [], (where, violations)


def test_the_battle_end_and_replay_pages_pass_axe_and_read_right(server: str, browser: Browser):
    """axe-core (WCAG 2.1 A/AA) on the lobby, battle, end and replay pages; "Why this move?" comes before
    the move buttons in tab order; a defeated hero reads "0/30 defeated", never a negative health."""
    if not AXE.is_file():
        pytest.skip(f"no {AXE.relative_to(REPO)}: make tools installs axe-core from npm")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(server + "/")  # the arena registered the shipped champion at start: offered first, chosen
        assert page.locator("#opponent").input_value() == "champion" and page.locator("#champion-note").count() == 1
        _axe(page, "lobby")
        _start(page, server, "baseline:greedy", group="arena-axe")
        _axe(page, "battle page, first move")
        # document order is tab order here (no positive tabindex): the rationale before every move button
        assert page.evaluate("""() => {
            const why = document.querySelector('#rationale');
            const moves = [...document.querySelectorAll('#play button.act')];
            return moves.length > 0 && !document.querySelector('[tabindex]:not([tabindex="-1"]):not([tabindex="0"])')
                && moves.every(b => why.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
        }""")

        def check(n: int) -> None:
            if n in (4, 10):
                _axe(page, f"battle page, move {n}")

        _click_to_the_end(page, each=check)
        _axe(page, "end page")
        healths = [" ".join(h.split()) for h in page.locator(".health").all_text_contents()]
        assert all(re.fullmatch(r"♥ (\d+/30|0/30 defeated)", h) for h in healths), healths
        if page.locator("#result h1").inner_text() in ("You won!", "You lost") and "hero" in \
                page.locator("#result p").first.inner_text():
            assert sum("defeated" in h for h in healths) == 1, healths
        with page.expect_navigation():
            page.click("text=Watch the replay")
        _axe(page, "replay page, first step")
        with page.expect_navigation():
            page.click("text=Last »")
        _axe(page, "replay page, final state")
    finally:
        page.close()
