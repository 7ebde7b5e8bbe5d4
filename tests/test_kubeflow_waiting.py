"""The wait loop of the kubeflow target against Katib/TFJob status conditions.

Only the getter (the Kubernetes GET) is replaced; the condition logic, the clock
arithmetic and the messages are the real ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.targets.kubeflow.waiting import KubeflowJobError, last_true_condition, wait_for


def cond(type_: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def experiment(*conditions: dict[str, Any], kind: str = "Experiment") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": kind,
        "metadata": {"name": "hpt", "namespace": "team"},
        "status": {"conditions": list(conditions)},
    }


CREATED = cond("Created", reason="ExperimentCreated", message="Experiment is created")
RUNNING = cond("Running", reason="ExperimentRunning", message="Experiment is running")
# What Katib writes when it ends: Running flipped to False, the end condition appended.
STOPPED = cond("Running", "False", "ExperimentRunning", "Experiment is running")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def getter(states: list[dict[str, Any]]) -> Any:
    """Returns the states in order, then the last one forever."""
    calls = {"n": 0}

    def get() -> dict[str, Any]:
        i = min(calls["n"], len(states) - 1)
        calls["n"] += 1
        return states[i]

    get.calls = calls  # type: ignore[attr-defined]
    return get


def test_succeeded_after_running_returns_final_object() -> None:
    done = experiment(
        CREATED,
        STOPPED,
        cond("Succeeded", reason="ExperimentGoalReached", message="Objective goal has reached"),
    )
    clock = FakeClock()
    seen: list[str | None] = []
    get = getter([experiment(), experiment(CREATED), experiment(CREATED, RUNNING), done])
    result = wait_for(
        get,
        timeout_s=60,
        poll_s=5,
        clock=clock,
        sleep=clock.sleep,
        on_status=lambda o: seen.append((last_true_condition(o) or {}).get("type")),
    )
    assert result is done
    assert seen == [None, "Created", "Running", "Succeeded"]
    assert clock.sleeps == [5, 5, 5]


def test_failed_surfaces_reason_and_message() -> None:
    failed = experiment(
        CREATED,
        STOPPED,
        cond("Failed", reason="ExperimentFailed", message="Suggestion pod crashed:\n  OOMKilled"),
    )
    clock = FakeClock()
    with pytest.raises(KubeflowJobError) as err:
        wait_for(getter([failed]), timeout_s=60, poll_s=5, clock=clock, sleep=clock.sleep)
    msg = str(err.value)
    assert msg == (
        "Experiment team/hpt failed: Failed (ExperimentFailed): Suggestion pod crashed: OOMKilled"
    )
    assert "\n" not in msg


def test_failure_budget_exhausted_is_a_failure() -> None:
    # status_util.go: failedTrialsCount >= maxFailedTrialCount → MarkExperimentStatusFailed.
    spent = experiment(
        CREATED,
        STOPPED,
        cond(
            "Failed",
            reason="ExperimentFailed",
            message="Experiment has failed because max failed count has reached",
        ),
    )
    clock = FakeClock()
    with pytest.raises(KubeflowJobError, match="max failed count has reached"):
        wait_for(
            getter([experiment(CREATED, RUNNING), spent]),
            timeout_s=60,
            poll_s=5,
            clock=clock,
            sleep=clock.sleep,
        )


def test_trial_budget_exhausted_is_a_success() -> None:
    # status_util.go: completedTrialsCount >= maxTrialCount → Succeeded, ExperimentMaxTrialsReached.
    spent = experiment(
        CREATED,
        STOPPED,
        cond(
            "Succeeded",
            reason="ExperimentMaxTrialsReached",
            message="Experiment has succeeded because max trial count has reached",
        ),
    )
    clock = FakeClock()
    out = wait_for(getter([spent]), timeout_s=60, poll_s=5, clock=clock, sleep=clock.sleep)
    assert last_true_condition(out) == spent["status"]["conditions"][-1]
    assert clock.sleeps == []


def test_timeout_names_object_and_last_condition() -> None:
    clock = FakeClock()
    get = getter([experiment(CREATED, RUNNING, kind="TFJob")])
    with pytest.raises(KubeflowJobError) as err:
        wait_for(get, timeout_s=12, poll_s=5, clock=clock, sleep=clock.sleep)
    assert str(err.value) == (
        "TFJob team/hpt did not finish within 12s "
        "(last condition: Running (ExperimentRunning): Experiment is running)"
    )
    # polls at t=0, 5, 10, 12: the last sleep is cut to the deadline
    assert clock.sleeps == [5, 5, 2]
    assert get.calls["n"] == 4


def test_restarting_keeps_waiting_and_custom_types_are_honoured() -> None:
    clock = FakeClock()
    restarting = experiment(CREATED, cond("Restarting", reason="ExperimentRestarting"))
    done = experiment(CREATED, cond("Restarting", "False"), cond("Done"))
    out = wait_for(
        getter([restarting, done]),
        succeeded=("Done",),
        timeout_s=60,
        poll_s=1,
        clock=clock,
        sleep=clock.sleep,
    )
    assert out is done


def test_bad_timing_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="timeout_s must be > 0, got 0"):
        wait_for(lambda: experiment(), timeout_s=0, poll_s=1)
    with pytest.raises(ValueError, match="poll_s must be > 0, got -1"):
        wait_for(lambda: experiment(), timeout_s=1, poll_s=-1)
