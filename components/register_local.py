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
    """Copy the model into `registry_dir/<model_name>/vN` with a model card naming its lineage."""
    from pipelines.targets.local import registry

    card = registry.register(
        model.path,
        registry_dir,
        model_name,
        {
            "metrics": dict(evaluation.metadata),
            "hyperparameters": model.metadata.get("hyperparameters", {}),
            "lineage": {
                "dataset": dataset.uri,
                "dataset_source": dataset.metadata.get("source"),
                "dataset_metadata_sha256": dataset.metadata.get("metadata_sha256"),
                "trials": trials.uri,
                "study": trials.metadata.get("study"),
                "continued_from": trials.metadata.get("continued_from") or [],
                "run": trials.uri.rsplit("/", 2)[0],  # <pipeline root>/<run>/<task>/trials
                "best_trial_id": best_trial_id,
                "model": model.uri,
                "evaluation": evaluation.uri,
            },
        },
    )
    registered.uri = card["path"]
    registered.metadata.update({"name": model_name, "version": card["version"], **card["lineage"]})
