"""The failure budget at its boundary, as Vertex documents `max_failed_trial_count`."""

from __future__ import annotations

import pytest

from pipelines.study import failure_rules
from pipelines.study import trials as tl


def trial(trial_id: int, state: str, **local) -> dict:
    record = {"id": str(trial_id), "state": state, "infeasibleReason": f"boom {trial_id}"}
    if local:
        record[tl.LOCAL_KEY] = local
    return record


def ok(i: int) -> dict:
    return trial(i, "SUCCEEDED")


def failed(i: int) -> dict:
    return trial(i, "INFEASIBLE")


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_the_study_fails_when_failures_reach_the_budget_not_before(budget):
    trials = [ok(1)] + [failed(i) for i in range(2, 2 + budget)]
    assert failure_rules.stop_reason(trials[:-1], budget) is None  # budget - 1 failures
    reason = failure_rules.stop_reason(trials, budget)
    assert reason == (
        f"{budget} trials failed, reaching max_failed_trial_count={budget}; last: boom {budget + 1}"
    )


def test_with_a_budget_a_failed_first_trial_is_one_failure_like_any_other():
    assert failure_rules.stop_reason([failed(1), ok(2)], 2) is None


def test_without_a_budget_a_failed_first_trial_stops_the_study():
    reason = failure_rules.stop_reason([failed(1)], 0)
    assert reason is not None and reason.startswith("the first trial failed")
    assert failure_rules.stop_reason([ok(1), failed(2), failed(3)], 0) is None
    assert "3 trials failed, more than succeeded (1)" in (
        failure_rules.stop_reason([ok(1), failed(2), failed(3), failed(4)], 0) or ""
    )


def test_cancelled_and_diverged_trials_are_not_failures():
    cancelled = trial(2, "INFEASIBLE", cancelled=True)
    diverged = ok(3)  # a diverged trial reports the worst metric and succeeds
    assert not failure_rules.counts_as_failed(cancelled)
    assert failure_rules.stop_reason([ok(1), cancelled, diverged], 1) is None


def test_the_reasons_name_the_trials_own_error_and_the_remedy_exactly():
    assert failure_rules.stop_reason([failed(1)], 0) == (
        "the first trial failed, which points at the training code, so the study "
        "stopped (Vertex's rule): boom 1"
    )
    assert failure_rules.stop_reason([ok(1), failed(2), failed(3), failed(4)], 0) == (
        "3 trials failed, more than succeeded (1); set max_failed_trial_count to choose the limit"
    )
    silent = {"id": "1", "state": "INFEASIBLE"}  # a trial that failed without a reason
    assert failure_rules.stop_reason([silent], 0) == (
        "the first trial failed, which points at the training code, so the study "
        "stopped (Vertex's rule): "
    )
    assert failure_rules.stop_reason([silent], 1) == (
        "1 trials failed, reaching max_failed_trial_count=1; last: "
    )


def test_without_a_budget_as_many_failures_as_successes_go_on():
    trials = [ok(1), ok(2), ok(3), failed(4), failed(5), failed(6)]
    assert failure_rules.stop_reason(trials, 0) is None
    assert failure_rules.stop_reason([*trials, failed(7)], 0) is not None


def test_a_study_whose_trial_ids_do_not_start_at_1_is_judged_on_counts():
    assert failure_rules.stop_reason([], 0) is None
    assert failure_rules.stop_reason([failed(2), ok(3)], 0) is None
