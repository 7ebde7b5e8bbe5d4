"""Registration step, kubeflow binding: a KFP Model with its evaluation (+ Model Registry)."""

from kfp import dsl

from components.base import component


@component
def register_on_kubeflow(
    model: dsl.Input[dsl.Model],
    evaluation: dsl.Input[dsl.Metrics],
    trials: dsl.Input[dsl.Artifact],
    dataset: dsl.Input[dsl.Dataset],
    best_trial_id: str,
    model_name: str,
    model_registry_url: str,
    run_id: str,
    registered: dsl.Output[dsl.Model],
    data_pvc: str = "",
    data_mount_path: str = "",
):
    """The model as a `system.Model` carrying its test metrics and lineage in metadata.

    With `model_registry_url`, also a new version (`run_id`) of `model_name` in Kubeflow Model
    Registry, at a URI a server can read (on the data claim `pvc://<data_pvc>/<path>`, not this
    pod's mount path). The final job's MLflow run is tagged with it: `<model_name>/<run_id>`.
    """
    from pipelines.jobs.trainer_args import LOCATION_KEY, artifact_location
    from pipelines.tracking.steps import RegisteredTracking

    tracker = RegisteredTracking(evaluation.metadata.get("tracking") or {})  # warms meanwhile
    location = artifact_location(model)
    metrics = {k: v for k, v in evaluation.metadata.items() if isinstance(v, int | float)}
    lineage = {
        "dataset": artifact_location(dataset),
        "dataset_metadata_sha256": dataset.metadata.get("metadata_sha256", ""),
        "trials": trials.uri,
        "best_trial_id": best_trial_id,
        "run_id": run_id,
    }
    registered.metadata.update(
        {
            "name": model_name,
            LOCATION_KEY: location,
            "framework": "tensorflow",
            "hyperparameters": model.metadata.get("hyperparameters", {}),
            "metrics": metrics,
            **lineage,
        }
    )
    if model_registry_url:
        from pipelines.targets.kubeflow import model_registry

        uri = model_registry.storage_uri(location, data_pvc, data_mount_path)
        registered.metadata["storage_uri"] = uri
        ids = model_registry.register_version(
            url=model_registry_url,
            name=model_name,
            uri=uri,
            version=run_id,
            metrics=metrics,
            lineage=lineage,
        )
        registered.metadata.update(ids)
        print(f"registered {model_name} version {run_id} in {model_registry_url}")
    where = registered.metadata.get("storage_uri") or registered.uri  # the registry's, else KFP's
    tracker.record(model=f"{model_name}/{run_id}", path=where)
