"""Work caps and fine-grained cancellation in the core (issue 24, section 1): a series refuses
more search work than one call may ask for before writing anything, a cancelled series stops
within a decision (in worker processes too), and a cancelled training stops within a batch."""

from __future__ import annotations

import threading
import time

import pytest

from adapters import work
from extrarlhf.core.errors import WorkCapExceeded
from extrarlhf.core.work_caps import MAX_SEARCH_SIMS_BATTLES
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.runtime.series import run_series
from extrarlhf.training.hyper import MAX_TRAINING_COST

from ..training_helpers import train_small


def test_a_series_asking_for_too_much_search_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(WorkCapExceeded) as caught:
        run_series(tmp_path, "huge", 1_000_000, p1_model="search:baseline:greedy?sims=4096",
                   opponent="baseline:greedy")
    message = str(caught.value)
    assert "MAX_SEARCH_SIMS_BATTLES = 2,000,000" in message and "4,096,000,000" in message
    assert "n_battles of at most 488" in message
    assert caught.value.details == {"cap": "MAX_SEARCH_SIMS_BATTLES", "limit": MAX_SEARCH_SIMS_BATTLES,
                                    "asked": 4_096_000_000}
    assert list(tmp_path.iterdir()) == []
    run_series(tmp_path, "plain", 1, p1_model="baseline:greedy", opponent="baseline:greedy")  # no search: no cap


def test_a_benchmark_asking_for_too_much_search_is_refused_before_it_plays(tmp_path):
    with pytest.raises(WorkCapExceeded) as caught:
        benchmark_models("search:baseline:greedy?sims=4096", "baseline:greedy", n_pairs=10_000,
                         checkpoints_dir=tmp_path)
    assert "this benchmark (10,000 pairs, 20 against each baseline) asks for 82,247,680 search sims x battles" \
        in str(caught.value)
    assert caught.value.details["cap"] == "MAX_SEARCH_SIMS_BATTLES"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cancelled_series_stops_within_a_decision(tmp_path, workers):
    flag = threading.Event()
    stopped_at: list[float] = []

    def cancel() -> bool:
        return flag.is_set()

    def series() -> dict:
        try:
            return run_series(tmp_path, "slow", 64, p1_model="search:baseline:greedy?sims=2048",
                              opponent="baseline:greedy", max_workers=workers, cancel=cancel)
        finally:
            stopped_at.append(time.monotonic())

    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(series()))
    thread.start()
    time.sleep(3.0)  # workers started and deep in their first chunk (16 battles of ~1.5 s decisions)
    flag.set()
    cancelled_at = time.monotonic()
    thread.join(60)
    assert not thread.is_alive()
    assert stopped_at[0] - cancelled_at < 5.0  # a chunk would take minutes
    assert result["cancelled"] is True and result["remaining"] == 64 - result["ran"]
    assert result["summary"]["by_status"].get("unfinished", 0) + result["ran"] >= 1


def test_training_over_the_cost_cap_is_refused_and_registers_nothing(tmp_path):
    with pytest.raises(WorkCapExceeded) as caught:
        train_small(tmp_path / "ck", epochs=1000, hidden=4096, hidden2=4096)
    assert "MAX_TRAINING_COST = 6e+12" in str(caught.value)
    assert caught.value.details["cap"] == "MAX_TRAINING_COST"
    assert caught.value.details["asked"] > MAX_TRAINING_COST
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())


def test_a_cancelled_training_stops_within_a_batch(tmp_path):
    polls = {"n": 0}

    def cancel() -> bool:
        polls["n"] += 1
        return polls["n"] > 3

    with work.scope(cancel), pytest.raises(work.WorkCancelled):
        train_small(tmp_path / "ck", epochs=50)
    assert polls["n"] == 4  # the fourth batch never ran
    assert not (tmp_path / "ck").exists() or not list((tmp_path / "ck").glob("*.onnx"))
