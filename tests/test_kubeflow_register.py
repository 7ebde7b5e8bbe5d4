"""Kubeflow registration: a KFP Model artifact with its metrics, and Model Registry versions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pipelines.targets.kubeflow import model_registry
from pipelines.targets.kubeflow.steps.register import register_on_kubeflow


class FakeRegistry:
    made: list[dict[str, Any]] = []

    def __init__(self, server_address, port, *, author, is_secure):
        self.where = (server_address, port, author, is_secure)

    # Keyword names of the real `ModelRegistry.register_model` (held to it in
    # test_behaviour_fakes.py): a misspelt keyword fails here as it would on a cluster.
    def register_model(
        self,
        name,
        uri,
        *,
        model_format_name,
        model_format_version,
        version,
        description=None,
        metadata=None,
    ):
        FakeRegistry.made.append(
            {
                "where": self.where,
                "name": name,
                "uri": uri,
                "model_format_name": model_format_name,
                "model_format_version": model_format_version,
                "version": version,
                "description": description,
                "metadata": metadata,
            }
        )
        return SimpleNamespace(id="17")


def artifact(uri: str, **metadata: Any) -> SimpleNamespace:
    return SimpleNamespace(uri=uri, path=uri, metadata=dict(metadata))


def test_model_registry_gets_a_version_with_scalar_metadata_only():
    FakeRegistry.made.clear()
    ids = model_registry.register_version(
        url="https://registry.kubeflow.svc:8443",
        name="hpt-cnn",
        uri="/mnt/hpt/v2/artifacts/p/run-7/final-job-spec/1/job_dir/model",
        version="run-7",
        metrics={"test_accuracy": 0.97, "per_class": {"0": 1.0}},
        lineage={"best_trial_id": "3", "dataset": "/mnt/hpt/d", "empty": ""},
        client_factory=FakeRegistry,
    )
    assert ids == {"registered_model_id": "17", "version": "run-7"}
    (made,) = FakeRegistry.made
    assert made["where"] == ("https://registry.kubeflow.svc", 8443, "hpt-pipeline", True)
    assert (made["model_format_name"], made["model_format_version"]) == ("tensorflow", "2")
    assert made["metadata"] == {
        "test_accuracy": 0.97,
        "best_trial_id": "3",
        "dataset": "/mnt/hpt/d",
    }


def test_the_registered_artifact_carries_location_metrics_and_lineage():
    model = artifact(
        "minio://mlpipeline/v2/artifacts/p/run-7/train/model",
        location="/mnt/hpt/run-7/model",
        hyperparameters={"learning_rate": 0.01},
    )
    evaluation = artifact(
        "minio://x/eval", test_accuracy=0.97, test_loss=0.1, passed_threshold=True
    )
    dataset = artifact("minio://x/dataset", location="/mnt/hpt/run-7/dataset", metadata_sha256="ab")
    registered = artifact("minio://x/registered")
    register_on_kubeflow.python_func(
        model=model,
        evaluation=evaluation,
        trials=artifact("minio://x/trials"),
        dataset=dataset,
        best_trial_id="3",
        model_name="hpt-cnn",
        model_registry_url="",
        run_id="run-7",
        registered=registered,
    )
    meta = registered.metadata
    assert meta["location"] == "/mnt/hpt/run-7/model"
    assert meta["metrics"] == {"test_accuracy": 0.97, "test_loss": 0.1, "passed_threshold": True}
    assert meta["dataset"] == "/mnt/hpt/run-7/dataset" and meta["best_trial_id"] == "3"
    assert meta["hyperparameters"] == {"learning_rate": 0.01}
    assert "registered_model_id" not in meta  # no registry configured: nothing sent


def register_on_the_claim(monkeypatch: Any, evaluation: SimpleNamespace) -> SimpleNamespace:
    """Run the register step of run `run-7` on the data claim `hpt-data` (mounted at /mnt/hpt)
    against `FakeRegistry`; the `registered` artifact it filled."""
    FakeRegistry.made.clear()
    real = model_registry.register_version
    monkeypatch.setattr(
        model_registry, "register_version", lambda **kw: real(**kw, client_factory=FakeRegistry)
    )
    model = artifact(
        "minio://mlpipeline/v2/artifacts/p/run-7/train/model", location="/mnt/hpt/run-7/model"
    )
    registered = artifact("minio://x/registered")
    register_on_kubeflow.python_func(
        model=model,
        evaluation=evaluation,
        trials=artifact("minio://x/trials"),
        dataset=artifact("minio://x/dataset", location="/mnt/hpt/run-7/dataset"),
        best_trial_id="3",
        model_name="hpt-cnn",
        model_registry_url="https://registry.kubeflow.svc:8443",
        run_id="run-7",
        registered=registered,
        data_pvc="hpt-data",
        data_mount_path="/mnt/hpt",
    )
    return registered


def test_with_a_data_claim_the_registry_gets_a_pvc_uri(monkeypatch: Any) -> None:
    registered = register_on_the_claim(monkeypatch, artifact("minio://x/eval", test_accuracy=0.9))
    (made,) = FakeRegistry.made
    assert made["uri"] == "pvc://hpt-data/run-7/model"  # not this pod's /mnt/hpt path
    assert registered.metadata["storage_uri"] == "pvc://hpt-data/run-7/model"
    assert registered.metadata["location"] == "/mnt/hpt/run-7/model"  # where steps read it
    assert model_registry.storage_uri("gs://b/m", "hpt-data", "/mnt/hpt") == "gs://b/m"
    assert model_registry.storage_uri("/mnt/hptx/m", "hpt-data", "/mnt/hpt") == "/mnt/hptx/m"
