"""`tracking: vertex` (issue 55): the fetch step writes the trials as Vertex AI ExperimentRuns.

Offline: `aiplatform`'s own Experiments code runs against `tests/fake_vertex_experiments.py`,
which parses every request it sends strictly into the `aiplatform_v1` types.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from pipelines.settings import Settings, SettingsError
from pipelines.study import trials as tl
from pipelines.targets.vertex import experiments
from pipelines.targets.vertex import metadata as vertex_metadata
from pipelines.targets.vertex import trials as vertex_trials
from pipelines.targets.vertex.steps.tune import fetch_trials
from tests.fake_vertex_experiments import PIPELINE_CONTEXT, PIPELINE_JOB, STORE, WHERE, FakeVertex
from tests.test_pipeline_spec import compiled
from tests.vertex_resolve import resolve_inputs

TENSORBOARD = f"{WHERE}/tensorboards/77"
SERVICE_ACCOUNT = "trainer@proj.iam.gserviceaccount.com"
HPT_JOB = f"{WHERE}/hyperparameterTuningJobs/42"
GCP_RESOURCES = json.dumps(
    {
        "resources": [
            {
                "resourceType": "HyperparameterTuningJob",
                "resourceUri": f"https://us-central1-aiplatform.googleapis.com/v1/{HPT_JOB}",
            }
        ]
    }
)


def _trial(trial_id: str, lr: float, *steps: dict[str, float], state: Any = None) -> dict:
    measurements = [tl.measurement(i, m) for i, m in enumerate(steps, start=1)]
    return tl.make_trial(
        trial_id,
        {"learning_rate": lr, "optimizer": "adam"},
        state=state or tl.TrialState.SUCCEEDED,
        final_measurement=measurements[-1] if measurements else None,
        measurements=measurements,
    )


TRIALS = [
    _trial(
        "1", 0.01, {"val_accuracy": 0.5, "val_loss": 1.2}, {"val_accuracy": 0.7, "val_loss": 0.9}
    ),
    _trial(
        "2", 0.1, {"val_accuracy": 0.6, "val_loss": 1.0}, {"val_accuracy": 0.8, "val_loss": 0.6}
    ),
    _trial("3", 0.5, state=tl.TrialState.INFEASIBLE),
]


def _fetch(monkeypatch, capsys, tmp_path, inputs: dict) -> list[str]:
    """Run the compiled fetch step's body with these inputs; what it printed, by line."""
    monkeypatch.setattr(vertex_trials, "fetch_trials", lambda job: TRIALS)
    monkeypatch.setattr(vertex_metadata, "record_trials", lambda *a, **k: [])  # test_lineage's
    capsys.readouterr()
    fetch_trials.python_func(
        **{**inputs, "gcp_resources": GCP_RESOURCES, "pipeline_job": PIPELINE_JOB},
        trials=SimpleNamespace(name="trials", path=str(tmp_path / "trials.json"), metadata={}),
    )
    return capsys.readouterr().out.splitlines()


def test_compile_vertex_with_tracking_vertex_writes_an_experiment_run_per_trial(
    tmp_path, monkeypatch, capsys
):
    """Must show: `compile --target vertex` with `tracking: vertex`, the Experiment and run
    requests parse into the `aiplatform` types (an Experiment named after the pipeline, a run
    per trial with its params, final metrics, time series and state; the pipeline run a run
    of the Experiment)."""
    settings = Settings(
        tracking="vertex",
        tensorboard=TENSORBOARD,
        service_account=SERVICE_ACCOUNT,
        display_name="HPT Pipeline_v2",
    )
    inputs = resolve_inputs(compiled(tmp_path, "vertex", settings), outputs={})["fetch-trials"]
    assert inputs["experiment"] == "hpt-pipeline-v2" and inputs["tensorboard"] == TENSORBOARD
    fake = FakeVertex(monkeypatch)

    assert _fetch(monkeypatch, capsys, tmp_path, inputs) == []  # nothing failed, nothing missing

    experiment = f"{STORE}/contexts/hpt-pipeline-v2"
    contexts = {r.context_id: r.context for r in fake.of("create_context")}
    assert contexts["hpt-pipeline-v2"].schema_title == "system.Experiment"
    assert fake.nodes[experiment].metadata["backing_tensorboard_resource"] == TENSORBOARD
    runs = [f"hpt-pipeline-v2-42-trial-{i}" for i in ("1", "2", "3")]
    assert [c for c in contexts if c != "hpt-pipeline-v2"] == runs
    assert all(contexts[r].schema_title == "system.ExperimentRun" for r in runs)
    assert fake.children[experiment] == [f"{STORE}/contexts/{r}" for r in runs] + [PIPELINE_CONTEXT]
    first, failed = (
        fake.nodes[f"{STORE}/contexts/{runs[0]}"],
        fake.nodes[f"{STORE}/contexts/{runs[2]}"],
    )
    assert dict(first.metadata["_params"]) == {"learning_rate": 0.01, "optimizer": "adam"}
    assert dict(first.metadata["_metrics"]) == {"val_accuracy": 0.7, "val_loss": 0.9}
    assert first.metadata["_state"] == "COMPLETE" and failed.metadata["_state"] == "FAILED"
    assert fake.time_series("42-trial-1") == {
        "val_accuracy": [(1, 0.5), (2, 0.7)],
        "val_loss": [(1, 1.2), (2, 0.9)],
    }
    [tb_experiment] = fake.of("create_tensorboard_experiment")
    assert tb_experiment.tensorboard_experiment_id == "hpt-pipeline-v2"
    assert tb_experiment.parent == TENSORBOARD


def test_without_a_tensorboard_the_runs_get_no_time_series_and_that_is_said(
    tmp_path, monkeypatch, capsys
):
    inputs = resolve_inputs(compiled(tmp_path, "vertex", Settings(tracking="vertex")), {})
    fake = FakeVertex(monkeypatch)

    printed = _fetch(monkeypatch, capsys, tmp_path, inputs["fetch-trials"])

    assert printed == [experiments.NO_TIME_SERIES]
    assert len(fake.of("create_context")) == 1 + len(TRIALS)  # the Experiment, a run per trial
    assert not fake.of("write_tensorboard_run_data") and not fake.of("get_tensorboard")
    metrics = fake.nodes[f"{STORE}/contexts/hpt-pipeline-42-trial-2"].metadata["_metrics"]
    assert dict(metrics) == {"val_accuracy": 0.8, "val_loss": 0.6}


def test_without_tracking_vertex_the_fetch_step_writes_no_experiment(tmp_path, monkeypatch, capsys):
    inputs = resolve_inputs(compiled(tmp_path, "vertex", Settings()), {})["fetch-trials"]
    assert inputs["experiment"] == ""
    fake = FakeVertex(monkeypatch)
    assert _fetch(monkeypatch, capsys, tmp_path, inputs) == []
    assert fake.requests == []


def test_a_failed_write_is_said_in_one_line_and_the_trials_stand(tmp_path, monkeypatch, capsys):
    from google.api_core.exceptions import PermissionDenied

    inputs = resolve_inputs(compiled(tmp_path, "vertex", Settings(tracking="vertex")), {})
    fake = FakeVertex(monkeypatch)

    def denied(request):
        raise PermissionDenied("aiplatform.metadataStores.get denied\nmore")

    monkeypatch.setattr(fake, "get_metadata_store", denied)
    printed = _fetch(monkeypatch, capsys, tmp_path, inputs["fetch-trials"])

    assert printed[-1] == (
        "tracking: writing the trials to Vertex AI Experiment hpt-pipeline failed "
        "(PermissionDenied: 403 aiplatform.metadataStores.get denied); the study's results stand"
    )
    assert len(json.loads((tmp_path / "trials.json").read_text())) == len(TRIALS)


def test_each_pipeline_run_adds_its_own_trial_runs_to_the_one_experiment(monkeypatch, capsys):
    """The Experiment is the pipeline's: the next run's trial 1 is a run beside the last's."""
    fake = FakeVertex(monkeypatch)
    for job in (HPT_JOB, f"{WHERE}/hyperparameterTuningJobs/43"):
        experiments.record_trials(TRIALS[:1], experiment="hpt-pipeline", job_name=job)
    assert fake.children[f"{STORE}/contexts/hpt-pipeline"] == [
        f"{STORE}/contexts/hpt-pipeline-42-trial-1",
        f"{STORE}/contexts/hpt-pipeline-43-trial-1",
    ]
    [experiment] = [r for r in fake.of("create_context") if r.context_id == "hpt-pipeline"]
    assert experiment.context.display_name == "hpt-pipeline"  # the second found it


def test_a_retried_fetch_step_writes_every_trials_run_once(tmp_path, monkeypatch, capsys):
    """Before: a retry stopped at the first ExperimentRun the failed attempt had made
    (`create` refuses one that exists) and wrote none of the rest; now a finished run is
    left as it is, the one the attempt stopped in is written again, the rest are made."""
    from google.api_core.exceptions import ServiceUnavailable

    settings = Settings(tracking="vertex", tensorboard=TENSORBOARD, service_account=SERVICE_ACCOUNT)
    inputs = resolve_inputs(compiled(tmp_path, "vertex", settings), {})["fetch-trials"]
    fake = FakeVertex(monkeypatch)
    runs = [f"{STORE}/contexts/hpt-pipeline-42-trial-{i}" for i in ("1", "2", "3")]
    update = fake.update_context

    def down_at_trial_2(request):  # the first attempt's connection drops at trial 2's params
        if request.context.name == runs[1] and "_params" in request.context.metadata:
            monkeypatch.setattr(fake, "update_context", update)
            raise ServiceUnavailable("metadata service unavailable")
        return update(request)

    monkeypatch.setattr(fake, "update_context", down_at_trial_2)
    first = _fetch(monkeypatch, capsys, tmp_path, inputs)
    assert "ServiceUnavailable" in first[-1] and runs[2] not in fake.nodes

    assert _fetch(monkeypatch, capsys, tmp_path, inputs) == []  # the retry: nothing refused

    made = [r.context_id for r in fake.of("create_context")]
    assert sorted(made) == ["hpt-pipeline", *(r.rsplit("/", 1)[-1] for r in runs)]
    assert fake.children[f"{STORE}/contexts/hpt-pipeline"] == [*runs, PIPELINE_CONTEXT]
    for name, trial in zip(runs, TRIALS, strict=True):
        run = fake.nodes[name].metadata
        assert dict(run["_params"]) == tl.trial_parameters(trial)
        final = tl.measurement_metrics(trial.get("finalMeasurement"))
        assert dict(run.get("_metrics", {})) == final
    assert fake.time_series("42-trial-1") == {  # written once, not again by the retry
        "val_accuracy": [(1, 0.5), (2, 0.7)],
        "val_loss": [(1, 1.2), (2, 0.9)],
    }
    assert fake.time_series("42-trial-2") == {
        "val_accuracy": [(1, 0.6), (2, 0.8)],
        "val_loss": [(1, 1.0), (2, 0.6)],
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hpt-pipeline", "hpt-pipeline"),
        ("HPT Nightly_run #3", "hpt-nightly-run-3"),
        ("--x" + "y" * 130, "x" + "y" * 63),
    ],
)
def test_the_experiment_is_the_pipeline_name_as_a_vertex_context_id(name, expected):
    assert experiments.experiment_id(name) == expected


def test_a_pipeline_name_too_short_for_an_experiment_is_refused_when_compiled(tmp_path):
    with pytest.raises(SettingsError) as err:
        compiled(tmp_path, "vertex", Settings(tracking="vertex", display_name="a_b"))
    assert str(err.value) == (
        "display_name='a_b': tracking=vertex names the Vertex AI Experiment after it, which "
        "takes at least 4 lowercase letters, digits or hyphens"
    )


def _cli(tmp_path, monkeypatch, *args: str, **settings: str) -> Any:
    from typer.testing import CliRunner

    from pipelines.app.cli import app

    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    config = tmp_path / "settings.yaml"
    config.write_text("".join(f"{key}: {value}\n" for key, value in settings.items()))
    return CliRunner().invoke(app, [*args, f"--config={config}"], catch_exceptions=False)


COMPILE = {
    "local": ("compile", "--target=local"),
    "kubeflow": ("compile", "--target=kubeflow", "--namespace=team-a"),
}


@pytest.mark.parametrize("target", ["local", "kubeflow"])
def test_tracking_vertex_is_refused_in_one_line_where_the_target_writes_no_experiment(
    tmp_path, monkeypatch, target
):
    """Before: `tracking: vertex` was refused by the settings check for every target, as
    unknown; now the vertex target writes it and the others say what they take."""
    out = tmp_path / "p.yaml"
    result = _cli(tmp_path, monkeypatch, *COMPILE[target], f"--output={out}", tracking="vertex")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "hpt-pipeline: error: tracking=vertex: Vertex AI Experiments are written by the "
        f"vertex target only; the {target} target takes auto, mlflow, off"
    )
    assert not out.exists()


def test_run_refuses_tracking_vertex_before_anything_runs(tmp_path, monkeypatch):
    output = tmp_path / "run"
    result = _cli(tmp_path, monkeypatch, "run", f"--output={output}", "--tracking=vertex")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "hpt-pipeline: error: tracking=vertex: Vertex AI Experiments are written by the "
        "vertex target only; the local target takes auto, mlflow, off"
    ]
    assert not output.exists()


@pytest.mark.parametrize("command", [("run",), COMPILE["local"], COMPILE["kubeflow"]])
def test_a_tensorboard_is_refused_where_the_target_reads_none(tmp_path, monkeypatch, command):
    """Before: `tensorboard` (a Vertex AI TensorBoard) was dropped silently by the local and
    kubeflow targets; now refused in one line, as spot capacity is."""
    target = "local" if command == ("run",) else command[1].removeprefix("--target=")
    out = tmp_path / ("run" if command == ("run",) else "p.yaml")
    where = f"--output={out}"
    result = _cli(
        tmp_path,
        monkeypatch,
        *command,
        where,
        tensorboard=TENSORBOARD,
        service_account=SERVICE_ACCOUNT,
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"hpt-pipeline: error: tensorboard={TENSORBOARD}: a Vertex AI TensorBoard, read by the "
        f"vertex target's jobs only; the {target} target's trials write their TensorBoard "
        "logs to the study folder (unset it, or use --target vertex)"
    ]
    assert not out.exists()


def test_compile_vertex_with_tracking_vertex_and_no_tensorboard_says_so(tmp_path, monkeypatch):
    out = tmp_path / "p.yaml"
    result = _cli(
        tmp_path, monkeypatch, "compile", "--target=vertex", f"--output={out}", tracking="vertex"
    )
    assert result.exit_code == 0, result.output
    assert f"note: {experiments.NO_TIME_SERIES}" in result.stdout.splitlines()
    assert out.exists()
