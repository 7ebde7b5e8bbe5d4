"""Describe an exported model as a KFP Model artifact (URI + provenance from its model.json)."""

from __future__ import annotations

import json
import posixpath
from typing import Any

from pipelines.jobs.trainer_args import LOCATION_KEY

MODEL_SUBDIR = "model"  # Vertex's AIP_MODEL_DIR = <base_output_directory>/model/


def read_model_card(model_dir: str) -> dict[str, Any]:
    """The trainer's model.json next to the SavedModel (local or gs://).

    A local card is plain JSON: reading it through TensorFlow's file system would cost
    the step a TensorFlow import (~2.8 s of the local final-training step).
    """
    if "://" not in model_dir:
        with open(posixpath.join(model_dir, "model.json"), encoding="utf-8") as f:
            card: dict[str, Any] = json.load(f)
        return card
    from trainer.export import read_model_card as read

    return read(model_dir)


def describe(model: Any, base_output_directory: str, job: str | None = None) -> dict[str, Any]:
    """Point `model` at `<base>/model` and copy lineage-worthy fields of model.json into metadata.

    Raises:
        FileNotFoundError: The job finished but exported no complete model.
    """
    model_dir = posixpath.join(base_output_directory.rstrip("/"), MODEL_SUBDIR)
    try:
        card = read_model_card(model_dir)
    except Exception as err:  # tf.errors.NotFoundError and friends
        raise FileNotFoundError(f"{model_dir}: no exported model (model.json missing)") from err
    if "://" in model_dir or "://" not in str(model.uri):
        model.uri = model_dir
    else:  # a shared-volume path: an object-store artifact keeps its URI, records where it is
        model.metadata[LOCATION_KEY] = model_dir
    model.metadata.update(
        {
            "framework": "tensorflow",
            "framework_version": card["versions"]["tensorflow"],
            "hyperparameters": card["hyperparameters"],
            "final_metrics": {k: v for k, v in card["final_metrics"].items() if k != "epoch"},
            "dataset_metadata_sha256": card["dataset"]["metadata_sha256"],
            "dataset": card["dataset"]["path"],
            "class_names": card["dataset"]["class_names"],
            "replicas": card["training"]["replicas"],  # chief + workers, as job_specs counts
            "strategy": card["training"]["strategy"],
            **({"training_job": job} if job else {}),
        }
    )
    return card
