"""Study budgets (max_study_hours, max_trials_no_progress): the local study, Vertex's spec."""

from __future__ import annotations

import json

import optuna
import pytest
from google.protobuf import json_format

from pipelines.settings import Settings, SettingsError
from pipelines.study import budgets
from pipelines.study import trials as tl
from pipelines.study.search_space import Metric
from pipelines.study.trials import TrialState
from pipelines.targets.vertex import hpt_job
from tests.test_local_study import study
from tests.test_pipeline_spec import for_target
from tests.test_vertex_hpt_job import payload

optuna.logging.set_verbosity(optuna.logging.WARNING)
ACCURACY = Metric("val_accuracy", "maximize")


def _trial(tid: str, value: float | None, end: str, **local) -> dict:
    return tl.make_trial(
        tid,
        {},
        state=TrialState.SUCCEEDED if value is not None else TrialState.INFEASIBLE,
        final_measurement=tl.measurement(3, {"val_accuracy": value}) if value is not None else None,
        end_time=end,
        local=local,
    )


def test_trials_without_progress_count_since_the_best_last_improved_by_end_time():
    trials = [
        _trial("1", 0.5, "2026-01-01T00:00:01Z"),
        _trial("3", 0.4, "2026-01-01T00:00:04Z"),
        _trial("2", 0.7, "2026-01-01T00:00:02Z"),  # ended second: the best from then on
        _trial("4", None, "2026-01-01T00:00:05Z"),  # a failure is no progress
        _trial("5", 0.9, "2026-01-01T00:00:06Z", earlyStopped=True, rung=1),  # never picked
    ]
    assert budgets.trials_without_progress(trials, ACCURACY) == 3
    assert budgets.Budgets(max_trials_no_progress=3).spent(trials, ACCURACY, 0.0) == (
        "max_trials_no_progress=3: 3 in a row"
    )
    assert budgets.Budgets(max_trials_no_progress=4).spent(trials, ACCURACY, 0.0) is None


@pytest.mark.slow
def test_a_study_without_progress_stops_as_done_and_says_which_budget(tmp_path):
    trials = study(
        tmp_path,
        "--epochs=1",
        max_trial_count=12,
        parallel_trial_count=1,
        study_spec_algorithm="RANDOM_SEARCH",
        max_trials_no_progress=2,
    )
    saved = json.loads((tmp_path / "study" / "study.json").read_text())
    assert saved["state"] == "SUCCEEDED"
    assert saved["stopReason"] == "max_trials_no_progress=2: 2 in a row"
    assert len(trials) < 12
    assert budgets.trials_without_progress(trials, ACCURACY) == 2


@pytest.mark.slow
def test_trials_running_when_the_wall_clock_ends_are_kept_not_failed(tmp_path):
    trials = study(
        tmp_path,
        "--epochs=20",
        "--sleep=0.5",
        max_trial_count=4,
        parallel_trial_count=2,
        max_study_hours=2.0 / 3600,
    )
    saved = json.loads((tmp_path / "study" / "study.json").read_text())
    assert saved["state"] == "SUCCEEDED"
    assert saved["stopReason"] == f"max_study_hours={2.0 / 3600:g} spent"
    assert len(trials) == 2  # no trial started after the budget ended
    for t in trials:
        assert tl.trial_outcome(t) == tl.INTERRUPTED, t
        assert t[tl.LOCAL_KEY]["interrupted"] == saved["stopReason"]
    assert saved["trialCounts"]["failed"] == 0


def test_vertex_study_spec_carries_the_stopping_config_parsed_strictly():
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

    request = hpt_job.launcher_request(
        payload(max_study_hours=1.5, max_trials_no_progress=5.0)  # doubles, as Vertex renders
    )
    pb = HyperparameterTuningJob.pb(request)
    stopping = pb.study_spec.study_stopping_config
    assert stopping.max_num_trials_no_progress.value == 5
    assert stopping.maximum_runtime_constraint.max_duration.seconds == 5400
    strict = json_format.MessageToJson(pb)
    json_format.Parse(strict, HyperparameterTuningJob.pb(HyperparameterTuningJob()))
    unset = HyperparameterTuningJob.pb(hpt_job.launcher_request(payload()))
    assert not unset.study_spec.HasField("study_stopping_config")


def test_kubeflow_refuses_a_study_budget_in_one_line(tmp_path):
    from pipelines.compiler import compile_pipeline

    settings = for_target("kubeflow", Settings(max_trials_no_progress=5))
    with pytest.raises(SettingsError, match=r"^max_trials_no_progress=5: a Katib Experiment has"):
        compile_pipeline("kubeflow", settings, tmp_path / "p.yaml")
