"""The model card: provenance written next to the SavedModel as model.json."""

from __future__ import annotations

import datetime
import platform
from typing import Any

from trainer.config import HParams, RunConfig


def model_card(hparams: HParams, run: RunConfig, result: Any) -> dict[str, Any]:
    """Provenance written next to the SavedModel as model.json."""
    import tensorflow as tf

    from trainer import records

    meta = result.metadata
    return {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "model": {"name": hparams.model, "weights": hparams.weights},
        "hyperparameters": hparams.hyperparameters(),
        "dataset": {
            "path": run.data,
            "metadata_sha256": records.file_digest(f"{run.data.rstrip('/')}/metadata.json")[
                "sha256"
            ],
            "source": meta.get("source"),
            "class_names": meta["class_names"],
            "image_shape": meta["image_shape"],
            "counts": {k: v["count"] for k, v in meta["splits"].items()},
        },
        "final_metrics": result.history[-1],
        "history": result.history,
        "metric_tag": run.metric_tag,
        "training": {
            "strategy": result.strategy,
            # model.json's keys (read by pipelines/jobs/model_artifact.py) keep their names:
            # `replicas` is processes, as a job's replica count; `replicas_in_sync` devices.
            "replicas_in_sync": result.replicas_in_sync,
            "replicas": result.training_tasks,
            "resumed_after_epoch": result.start_epoch,
            "seed": run.seed,
            "precision": result.precision.policy,
            "precision_requested": result.precision.requested,
            "precision_reason": result.precision.reason,
            "first_step_seconds": result.first_step_seconds,
            "trained_on": result.source,  # images, or a feature cache entry
        },
        "serving": {"input": "image_bytes", "outputs": ["probabilities", "class_id", "label"]},
        "versions": {
            "tensorflow": tf.__version__,
            "keras": __import__("keras").__version__,
            "python": platform.python_version(),
        },
    }
