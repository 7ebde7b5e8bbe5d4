"""The local registry's versions, and reading a Vertex HPT job's trials (offline, real protos)."""

import json

import pytest

from pipelines.study import trials
from pipelines.targets.local import registry
from pipelines.targets.vertex import trials as vertex_trials


def _model(folder, content: bytes):
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(content)
    return folder


def test_registry_versions_are_appended_atomically(tmp_path):
    model, other = _model(tmp_path / "model", b"x"), _model(tmp_path / "other", b"y")
    first = registry.register(model, tmp_path / "reg", "cnn", {"metrics": {"test_accuracy": 0.9}})
    second = registry.register(other, tmp_path / "reg", "cnn", {"metrics": {"test_accuracy": 0.95}})
    assert (first["version"], second["version"]) == (1, 2)
    assert registry.versions(tmp_path / "reg", "cnn") == [1, 2]
    assert [c["metrics"]["test_accuracy"] for c in registry.list_models(tmp_path / "reg")] == [
        0.9,
        0.95,
    ]
    assert not [p for p in (tmp_path / "reg" / "cnn").iterdir() if p.name.startswith(".staging")]


def test_the_same_model_registered_again_is_the_version_already_there(tmp_path):
    """Issue 51 (18): a rerun that changed nothing registered one more identical version."""
    model = _model(tmp_path / "model", b"x")
    first = registry.register(model, tmp_path / "reg", "cnn", {"metrics": {"test_accuracy": 0.9}})
    again = registry.register(model, tmp_path / "reg", "cnn", {"metrics": {"test_accuracy": 0.9}})
    assert (first["reused"], again["reused"]) == (False, True)
    assert again["version"] == 1 and again["path"] == first["path"]
    assert registry.versions(tmp_path / "reg", "cnn") == [1]
    assert [p.name for p in (tmp_path / "reg" / "cnn").iterdir()] == ["v1"]
    (model / "saved_model.pb").write_bytes(b"z")  # other bytes: a new version
    assert registry.register(model, tmp_path / "reg", "cnn", {})["version"] == 2
    assert registry.register(model, tmp_path / "reg", "other-name", {})["version"] == 1


def test_a_model_at_or_below_chance_is_said_in_one_line():
    """Issue 51 (18): 0.0889 on 10 classes (chance 0.1) was registered without a word."""
    assert registry.chance_line(0.0889, 10) == (
        "warning: test_accuracy 0.0889 is at or below chance (0.1000 for 10 classes): the model "
        "learned nothing; --eval-threshold keeps such a model out of the registry"
    )
    assert registry.chance_line(0.5, 2) is not None
    assert registry.chance_line(0.5001, 2) is None
    assert registry.chance_line(None, 10) is None and registry.chance_line(0.0, 1) is None


def test_job_name_from_gcp_resources():
    resources = {
        "resources": [
            {
                "resourceType": "HyperparameterTuningJob",
                "resourceUri": "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/hyperparameterTuningJobs/42",
            }
        ]
    }
    name = vertex_trials.job_name_from_gcp_resources(json.dumps(resources))
    assert name == "projects/p/locations/us-central1/hyperparameterTuningJobs/42"
    with pytest.raises(ValueError, match="names no HyperparameterTuningJob"):
        vertex_trials.job_name_from_gcp_resources('{"resources": []}')


def test_fetch_trials_converts_vertex_protos_to_the_trials_schema(monkeypatch):
    from google.cloud import aiplatform
    from google.cloud.aiplatform.compat.types import hyperparameter_tuning_job as gca_job
    from google.cloud.aiplatform.compat.types import study as gca_study

    proto = gca_job.HyperparameterTuningJob(
        name="projects/p/locations/us-central1/hyperparameterTuningJobs/42",
        trials=[
            gca_study.Trial(
                id="1",
                state=gca_study.Trial.State.SUCCEEDED,
                parameters=[gca_study.Trial.Parameter(parameter_id="num_units", value=128)],
                final_measurement=gca_study.Measurement(
                    step_count=5,
                    metrics=[gca_study.Measurement.Metric(metric_id="val_accuracy", value=0.9)],
                ),
            ),
            gca_study.Trial(
                id="2", state=gca_study.Trial.State.INFEASIBLE, infeasible_reason="OOM"
            ),
        ],
    )
    requested = []

    def fake_get(self, resource_name, **kwargs):
        requested.append(resource_name)
        return proto

    monkeypatch.setattr(aiplatform.HyperparameterTuningJob, "_get_gca_resource", fake_get)
    from google.auth.credentials import AnonymousCredentials

    got = vertex_trials.fetch_trials(proto.name, credentials=AnonymousCredentials())
    assert requested == [proto.name]
    assert [t["id"] for t in got] == ["1", "2"]
    assert trials.trial_state(got[0]) == trials.TrialState.SUCCEEDED
    assert trials.final_metric(got[0], "val_accuracy") == 0.9
    assert trials.trial_parameters(got[0]) == {"num_units": 128}
    assert trials.trial_state(got[1]) == trials.TrialState.INFEASIBLE
    for trial in got:
        trials.validate_trial(trial)


def test_a_fetched_vertex_trial_keeps_the_cost_reported_at_another_step(monkeypatch):
    """BEST_MEASUREMENT chose epoch 2; the cost came with epoch 3 only: it joins the final one."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform.compat.types import hyperparameter_tuning_job as gca_job
    from google.cloud.aiplatform.compat.types import study as gca_study

    def measurement(step, **metrics):
        return gca_study.Measurement(
            step_count=step,
            metrics=[
                gca_study.Measurement.Metric(metric_id=k, value=v) for k, v in metrics.items()
            ],
        )

    proto = gca_job.HyperparameterTuningJob(
        name="projects/p/locations/us-central1/hyperparameterTuningJobs/43",
        trials=[
            gca_study.Trial(
                id="1",
                state=gca_study.Trial.State.SUCCEEDED,
                final_measurement=measurement(2, val_accuracy=0.9),
                measurements=[
                    measurement(1, val_accuracy=0.5),
                    measurement(2, val_accuracy=0.9),
                    measurement(3, val_accuracy=0.8, latency_ms=4.0, model_size_mb=0.5),
                ],
            )
        ],
    )
    monkeypatch.setattr(
        aiplatform.HyperparameterTuningJob, "_get_gca_resource", lambda self, *a, **kw: proto
    )
    (got,) = vertex_trials.fetch_trials(proto.name, credentials=AnonymousCredentials())
    assert got["finalMeasurement"]["stepCount"] == "2"
    assert trials.measurement_metrics(got["finalMeasurement"]) == {
        "val_accuracy": 0.9,
        "latency_ms": 4.0,
        "model_size_mb": 0.5,
    }
    trials.validate_trial(got)


def test_the_register_step_says_chance_and_reuse_in_a_line_each(tmp_path, capsys):
    """The local register step: what a run's screen shows (its task output is streamed)."""
    from types import SimpleNamespace

    from pipelines.targets.local.steps.register import register_locally

    model = _model(tmp_path / "model", b"x")

    def step() -> SimpleNamespace:
        registered = SimpleNamespace(uri="", metadata={})
        register_locally.python_func(
            model=SimpleNamespace(
                path=str(model), uri=str(model), metadata={"class_names": list("abcdefghij")}
            ),
            evaluation=SimpleNamespace(uri="/e", metadata={"test_accuracy": 0.0889}),
            trials=SimpleNamespace(uri="/o/artifacts/run/tune/trials", metadata={}),
            dataset=SimpleNamespace(uri="/d", path="/d", metadata={}),
            best_trial_id="1",
            registry_dir=str(tmp_path / "reg"),
            model_name="hpt-cnn",
            registered=registered,
        )
        return registered

    first, second = step(), step()
    lines = capsys.readouterr().out.splitlines()
    chance = registry.chance_line(0.0889, 10)
    assert lines == [chance, chance, "hpt-cnn v1: the same model, already registered"]
    assert (first.metadata["version"], second.metadata["version"]) == (1, 1)
    assert (first.metadata["reused"], second.metadata["reused"]) == (False, True)
