"""Registration step, local binding: a new version in the local model registry."""

from kfp import dsl

from components.base import component


@component
def register_locally(
    model: dsl.Input[dsl.Model],
    evaluation: dsl.Input[dsl.Metrics],
    trials: dsl.Input[dsl.Artifact],
    dataset: dsl.Input[dsl.Dataset],
    best_trial_id: str,
    registry_dir: str,
    model_name: str,
    registered: dsl.Output[dsl.Artifact],
):
    """Copy the model into `registry_dir/<model_name>/vN` with a model card naming its lineage.

    The same model already registered (a rerun that changed nothing) is reported, not copied
    again; a model at or below chance accuracy is said in one line. The final job's MLflow run
    (the evaluate step's) goes into the card and lineage, and is tagged with the version.
    """
    from pipelines.jobs import trainer_args
    from pipelines.targets.local import registry
    from pipelines.tracking.steps import RegisteredTracking

    classes = len(model.metadata.get("class_names") or [])
    if warning := registry.chance_line(evaluation.metadata.get("test_accuracy"), classes):
        print(warning, flush=True)
    tracked = evaluation.metadata.get("tracking") or {}  # the final job's MLflow run
    tracker = RegisteredTracking(tracked)  # its writer warms up while the model is copied
    measured = {k: v for k, v in evaluation.metadata.items() if k != "tracking"}
    card = registry.register(
        model.path,
        registry_dir,
        model_name,
        {
            "metrics": measured,
            "hyperparameters": model.metadata.get("hyperparameters", {}),
            "lineage": {
                "dataset": trainer_args.artifact_location(dataset),  # its keyed folder
                "dataset_source": dataset.metadata.get("source"),
                "dataset_metadata_sha256": dataset.metadata.get("metadata_sha256"),
                "trials": trials.uri,
                "study": trials.metadata.get("study"),
                "continued_from": trials.metadata.get("continued_from") or [],
                "run": trials.uri.rsplit("/", 2)[0],  # <pipeline root>/<run>/<task>/trials
                "best_trial_id": best_trial_id,
                "model": model.uri,
                "evaluation": evaluation.uri,
                "mlflow_run_id": tracked.get("mlflow_run_id", ""),
            },
            "tracking": tracked,
        },
    )
    if card["reused"]:
        print(f"{model_name} v{card['version']}: the same model, already registered", flush=True)
    tracker.record(model=f"{model_name}/v{card['version']}", path=card["path"])
    registered.uri = card["path"]
    lineage = card["lineage"]
    registered.metadata.update(
        name=model_name, version=card["version"], reused=card["reused"], **lineage
    )
