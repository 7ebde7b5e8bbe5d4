"""A diverged trial is its own outcome on every target, never picked; a guessing study says so.

The trainer reports the worst value of every metric when its loss diverges (not finite, or
exploded) and exits 0: Vertex and Katib record it SUCCEEDED. What a user sees of it here:
the word `diverged` in the trials artifact, the table and the study's lines, no failure
budget spent, no pick, and one line when nothing else is left.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipelines.reports.trial_report import trial_rows
from pipelines.study import failure_rules, progress_lines, selection, trials_artifact
from pipelines.study import trials as tl
from pipelines.study.search_space import Metric, Parameter, SearchSpace
from pipelines.targets.kubeflow import katib_trials
from tests import katib_controller
from trainer.contract import DIVERGED_METRIC_VALUE, METRIC_GOALS

WORST = {tag: DIVERGED_METRIC_VALUE[goal] for tag, goal in METRIC_GOALS.items()}


def vertex_trial(trial_id: str, *steps: dict[str, float], final: int = -1) -> dict:
    """A trial as Vertex records it: SUCCEEDED, its measurements, one of them the final."""
    measurements = [tl.measurement(i, m) for i, m in enumerate(steps, start=1)]
    return tl.make_trial(
        trial_id,
        {"learning_rate": 10.0 ** -int(trial_id)},
        state=tl.TrialState.SUCCEEDED,
        final_measurement=measurements[final],
        measurements=measurements,
    )


# Epoch 1 looked fine, epoch 2's loss was NaN: BEST_MEASUREMENT made epoch 1 the final one.
DIVERGED_LATE = vertex_trial("1", {"val_accuracy": 0.93, "val_loss": 0.3}, WORST, final=0)
HONEST = vertex_trial("2", {"val_accuracy": 0.80, "val_loss": 0.6})
EVERY_EPOCH_DIVERGED = vertex_trial("3", WORST)


def test_a_trial_a_service_recorded_succeeded_with_the_worst_values_is_diverged():
    assert tl.trial_outcome(DIVERGED_LATE) == tl.DIVERGED
    assert tl.trial_outcome(EVERY_EPOCH_DIVERGED) == tl.DIVERGED
    assert tl.trial_outcome(HONEST) == tl.SUCCEEDED
    # A real 0 accuracy beside a real loss is a poor trial, not the trainer's report.
    assert tl.trial_outcome(vertex_trial("4", {"val_accuracy": 0.0, "val_loss": 2.3})) == (
        tl.SUCCEEDED
    )


def test_the_trials_artifact_writes_a_diverged_trial_infeasible_with_its_reason(tmp_path):
    artifact = SimpleNamespace(path=str(tmp_path / "trials.json"), metadata={})
    trials_artifact.write(artifact, [DIVERGED_LATE, HONEST], source="vertex", study_dir="job")
    written = json.loads(Path(artifact.path).read_text())
    assert [t["state"] for t in written] == [int(tl.TrialState.INFEASIBLE), 4]
    assert written[0]["infeasibleReason"].startswith("diverged: its loss was not finite")
    assert "lower the learning_rate range" in written[0]["infeasibleReason"]
    assert written[0]["measurements"] == DIVERGED_LATE["measurements"]  # kept, to be seen
    for trial in written:
        tl.validate_trial(trial)  # still Vertex's Trial, strictly
    assert artifact.metadata["outcomes"] == {"diverged": 1, "succeeded": 1}
    assert tl.trial_outcome(written[0]) == tl.DIVERGED  # read back: the same word


def test_a_diverged_trial_is_never_picked_though_an_earlier_epoch_scored_best():
    best = selection.select_best_trial([DIVERGED_LATE, HONEST], metric_id="val_accuracy")
    assert best.trial_id == "2"
    assert best.considered == 1


def test_a_study_whose_every_trial_diverged_stops_before_the_final_training_in_one_line():
    failed = tl.make_trial("4", {}, state=tl.TrialState.INFEASIBLE, infeasible_reason="exit 1")
    with pytest.raises(selection.SelectionError) as err:
        selection.select_best_trial(
            [DIVERGED_LATE, EVERY_EPOCH_DIVERGED, failed], metric_id="val_accuracy"
        )
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("no usable trial: 2 diverged (trial(s) 1, 3: a loss not finite")
    assert "stopping before the final training" in line
    assert "lower the learning_rate range" in line


def test_diverged_trials_spend_no_failure_budget_once_written_infeasible():
    written = [tl.mark_diverged(t) for t in (EVERY_EPOCH_DIVERGED, DIVERGED_LATE, HONEST)]
    assert tl.trial_state(written[0]) == tl.TrialState.INFEASIBLE
    assert not any(failure_rules.counts_as_failed(t) for t in written)
    # Trial "1" diverged first: a failed first trial stops a Vertex study, a diverged one not.
    assert failure_rules.stop_reason(written, 0) is None
    assert failure_rules.stop_reason(written, 1) is None


def test_the_trials_table_says_diverged_and_ranks_it_after_every_succeeded_trial():
    written = [tl.mark_diverged(t) for t in (EVERY_EPOCH_DIVERGED, HONEST)]
    rows = trial_rows(written, Metric("val_loss", "minimize"))
    assert [(r.trial_id, r.outcome) for r in rows] == [("2", "succeeded"), ("3", "diverged")]
    assert rows[1].note.startswith("diverged: ")


def test_the_study_line_of_a_diverged_trial_says_diverged_and_why():
    line = progress_lines.trial_line(tl.mark_diverged(EVERY_EPOCH_DIVERGED))
    assert line.startswith("trial 3 diverged: its loss was not finite or exploded")
    counts = progress_lines.counts([tl.mark_diverged(EVERY_EPOCH_DIVERGED), HONEST])
    assert (counts["diverged"], counts["failed"], counts["succeeded"]) == (1, 0, 1)


def test_katib_maps_a_trial_whose_last_report_diverged_to_diverged(tmp_path, monkeypatch):
    """Katib folds `max` for a maximized objective: epoch 1's 0.93 would be its value."""
    from trainer.hypertune_report import MetricReporter

    metrics_file = tmp_path / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metrics_file))
    reporter = MetricReporter("val_accuracy")  # what the trainer reports, epoch 1 then NaN
    reporter.report_epoch(1, {"val_accuracy": 0.93, "val_loss": 0.3})
    reporter.report_diverged(2)
    names = ["val_accuracy", "val_loss"]
    observation = katib_controller.collect_observation(str(metrics_file), names)
    trial = {
        "metadata": {"name": "hpt-study-a", "namespace": "team"},
        "spec": {"parameterAssignments": [{"name": "learning_rate", "value": "0.5"}]},
        "status": {
            "conditions": [{"type": "Succeeded", "status": "True"}],
            "observation": {"metrics": observation},
        },
    }
    space = SearchSpace(
        (Parameter("learning_rate", "double", min=1e-4, max=1.0, scale="log"),),
        (Metric("val_accuracy", "maximize"), Metric("val_loss", "minimize")),
    )
    strategies = {"val_accuracy": "max", "val_loss": "min"}
    mapped = katib_trials.to_vertex_trial(trial, "1", space, strategies)
    assert tl.trial_outcome(mapped) == tl.DIVERGED
    assert tl.trial_state(tl.mark_diverged(mapped)) == tl.TrialState.INFEASIBLE
    with pytest.raises(selection.SelectionError, match="no usable trial: 1 diverged"):
        selection.select_best_trial([mapped], metric_id="val_accuracy")


@pytest.mark.parametrize(
    ("accuracy", "said"),
    [(0.1003, True), (0.115, True), (0.13, False), (0.95, False)],
)
def test_a_pick_at_chance_is_said_in_one_line(accuracy, said):
    picked = vertex_trial("5", {"val_accuracy": accuracy, "val_loss": 2.3})
    note = selection.chance_note([HONEST, picked], "5", {"num_classes": 10.0})  # kfp: floats
    assert bool(note) is said
    if said:
        assert note.startswith(f"at chance: the best trial 5 has val_accuracy={accuracy:.4g}")
        assert "1/10=0.1" in note and "\n" not in note


def test_the_local_study_runs_on_past_diverged_trials_and_records_them_diverged(tmp_path):
    """Trials 1 and 2 diverge (the trainer's report, exit 0): no failure, the study goes on."""
    from pipelines.jobs.worker_pools import trial_worker_pool_specs
    from pipelines.targets.local.local_study import run_study
    from tests.conftest import ROOT

    space = SearchSpace(
        (Parameter("learning_rate", "double", min=1e-4, max=1.0, scale="log"),),
        (Metric("val_accuracy", "maximize"),),
    )
    fake = ["python", str(ROOT / "tests" / "fake_trainer.py")]
    args = ["--epochs=2", "--diverge_at=2", "--fail_trials=1,2"]
    trials = run_study(
        worker_pool_specs=trial_worker_pool_specs(image_uri="local", command=fake, args=args),
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_parameters=space.to_study_spec_parameters(),
        base_output_directory=str(tmp_path / "study"),
        max_trial_count=4,
        parallel_trial_count=1,
        seed=0,
        show_progress=False,
    )
    assert [tl.trial_outcome(t) for t in trials] == ["diverged"] * 2 + ["succeeded"] * 2
    first = trials[0]
    assert tl.trial_state(first) == tl.TrialState.INFEASIBLE
    assert first["infeasibleReason"] == (
        "diverged: training diverged at epoch 2 (train_loss=nan); lower the learning_rate range"
    )
    assert tl.final_metric(first, "val_accuracy") == 0.0  # the worst value, kept to be seen
    summary = json.loads((tmp_path / "study" / "study.json").read_text())
    assert summary["state"] == "SUCCEEDED"
    assert summary["trialCounts"]["diverged"] == 2 and summary["trialCounts"]["failed"] == 0
    assert summary["bestTrialId"] in ("3", "4")


@pytest.mark.parametrize(
    ("model", "weights", "space", "warned"),
    [
        ("mobilenet_v3_small", "none", "transfer", True),  # issue 51's case: a random frozen base
        ("resnet50", "none", None, True),  # transfer is resnet50's default preset
        ("mobilenet_v3_small", "imagenet", "transfer", False),  # what transfer is meant for
        ("mobilenet_v3_small", "none", "optimizer", False),  # the whole network trains
        ("cnn", None, None, False),  # no backbone
    ],
)
def test_transfer_with_random_weights_is_warned_in_one_line(model, weights, space, warned):
    from pipelines.settings import Settings
    from pipelines.settings_space import weights_warning

    settings = Settings(model=model, weights=weights, search_space=space, image_size=32)
    line = weights_warning(settings)
    assert bool(line) is warned
    if warned:
        assert line.startswith(
            f"warning: search_space=transfer with weights=none: its trainable_blocks from 0 "
            f"freeze a randomly initialised {model} backbone"
        )
        assert "--weights imagenet" in line and "--search-space optimizer" in line
        assert "\n" not in line


def test_a_rerun_reuses_diverged_trials_as_done_not_failed(tmp_path):
    from pipelines.app import study_identity

    study = tmp_path / "study"
    study.mkdir()
    written = [tl.mark_diverged(t) for t in (EVERY_EPOCH_DIVERGED, HONEST)]
    tl.write_trials(str(study / tl.TRIALS_FILE), written)
    assert study_identity.trial_counts(study) == {"done": 2, "failed": 0, "rerun": 0}
    assert (
        study_identity.resume_line(study)
        == f"resuming the study in {study}: 2 trial(s) done, reused"
    )


def test_the_pareto_plot_leaves_out_a_diverged_trials_worst_values(tmp_path, monkeypatch):
    from pipelines.reports import plotting
    from pipelines.reports.pareto_plot import plot_pareto

    plt = plotting.pyplot()
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it back
    objectives = [Metric("val_accuracy", "maximize"), Metric("model_size_mb", "minimize")]
    honest = vertex_trial("2", {"val_accuracy": 0.8, "model_size_mb": 5.0})
    plot_pareto([EVERY_EPOCH_DIVERGED, honest], objectives, [], tmp_path / "p.png")
    (ax,) = figures[0].axes
    xs = [float(x) for x, _ in ax.collections[0].get_offsets()]
    assert xs == [5.0]  # not 1e9: the axis stays readable, the diverged trial is no point
