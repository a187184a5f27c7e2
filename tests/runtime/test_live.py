"""Process-local live matches: ids, foreign/unknown/finished refusals, serialized concurrent use."""

import re
import threading

import pytest

from extrarlhf.core.errors import MatchError
from extrarlhf.runtime.live import MatchRegistry
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.sessions import SessionStore


@pytest.fixture
def registry(tmp_path):
    return MatchRegistry(SessionStore(tmp_path))


def _code(fn, *args):
    with pytest.raises(MatchError) as info:
        fn(*args)
    return info.value.code, str(info.value)


def test_ids_are_opaque_process_tagged_and_distinct(registry):
    ids = {registry.start("llm", "baseline:random", group="g", seed=s)[0] for s in range(5)}
    assert len(ids) == 5
    for match_id in ids:
        assert re.fullmatch(rf"m_{registry.process_tag}_[0-9a-f]{{24}}", match_id)
    assert {m["match_id"] for m in registry.list()} == ids


def test_foreign_unknown_and_malformed_ids_are_told_apart(registry, tmp_path):
    other = MatchRegistry(SessionStore(tmp_path))
    foreign_id, _ = other.start("llm", "baseline:random", group="g", seed=1)
    code, message = _code(lambda: registry.use(foreign_id).__enter__())
    assert code == "foreign_match" and "never crosses processes" in message
    code, _ = _code(lambda: registry.use(f"m_{registry.process_tag}_{'0' * 24}").__enter__())
    assert code == "unknown_match"
    code, message = _code(lambda: registry.use("match-1").__enter__())
    assert code == "unknown_match" and "not a match id" in message
    code, _ = _code(lambda: registry.use(42).__enter__())
    assert code == "invalid_argument"


def test_a_finished_match_leaves_the_live_set_and_is_refused_as_finished(registry):
    match_id, match = registry.start("rl", "baseline:random", p1_model="baseline:greedy", group="g", seed=3)
    assert match.done  # rl battles play themselves at start
    with registry.use(match_id) as m:
        result = m.finish()
    assert result["status"] == "finished"
    assert registry.list() == []
    code, message = _code(lambda: registry.use(match_id).__enter__())
    assert code == "match_finished" and "on disk" in message
    assert replay_battle(registry.store, "g", result["battle_id"])["reproduces"]


def test_concurrent_submits_on_one_match_are_serialized(registry):
    match_id, _ = registry.start("llm", "baseline:random", group="g", seed=9)
    errors: list[str] = []
    done = threading.Event()

    def player() -> None:
        while not done.is_set():
            try:
                with registry.use(match_id) as m:
                    if m.done:
                        done.set()
                        return
                    m.submit(m.legal_actions()[-1]["action_id"])
            except MatchError as exc:  # a racing submit may see the battle end first
                if exc.code != "match_finished":
                    errors.append(f"{exc.code}: {exc}")
                return

    threads = [threading.Thread(target=player) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with registry.use(match_id) as m:
        assert m.done
        result = m.finish()
    report = replay_battle(registry.store, "g", result["battle_id"])
    assert report["reproduces"], report  # a consistent trace: no interleaved half-applied decisions
