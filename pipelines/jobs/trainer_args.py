"""The trainer's command line inside a job payload, and artifact locations the trainer can read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.contract import flag

TRAINER_COMMAND = ["python", "-m", "trainer.task"]


LOCATION_KEY = "location"  # artifact metadata: where its content really is, when not at its URI


def artifact_location(artifact: Any) -> str:
    """Where a job reads an artifact: a recorded `location`, its gs:// URI, or its local path.

    On Vertex the gs:// URI (trainers read it through TF's GCS file system); here the
    local path; on Kubeflow with a shared volume, the `location` its writer recorded.
    """
    recorded = (getattr(artifact, "metadata", None) or {}).get(LOCATION_KEY)
    if recorded:
        return str(recorded)
    uri = str(artifact.uri)
    return uri if uri.startswith("gs://") else str(artifact.path)


def shared_location(artifact: Any, shared_root: str) -> str:
    """Where a job writes an artifact's content: under `shared_root` when set, else as above.

    With a shared volume (Kubeflow: a PVC mounted at `shared_root` in every pod) the
    content goes to `<shared_root>/<the URI's path without scheme and bucket>`, unique
    per run and task; the writer records it as the artifact's `location`.
    """
    uri = str(artifact.uri)
    if not shared_root or uri.startswith("gs://"):
        return artifact_location(artifact)
    tail = uri.split("://", 1)[-1].split("/", 1)[-1] if "://" in uri else uri.lstrip("/")
    location = f"{shared_root.rstrip('/')}/{tail}"
    artifact.metadata[LOCATION_KEY] = location
    return location


def trainer_flags(
    data: str,
    *,
    model: str,
    weights: str,
    epochs: int,
    batch_size: int,
    metric_tag: str,
    precision: str,
    seed: int,
) -> list[str]:
    """Fixed trainer flags shared by every trial and the final job, for data at `data`."""
    return [
        flag("data", data),
        flag("model", model),
        flag("weights", weights),
        flag("epochs", int(epochs)),
        flag("batch_size", int(batch_size)),
        flag("metric_tag", metric_tag),
        flag("precision", precision),
        flag("seed", int(seed)),
    ]


def trainer_args(dataset: Any, **fixed: Any) -> list[str]:
    """`trainer_flags` for a dataset artifact (read where `artifact_location` says)."""
    return trainer_flags(artifact_location(dataset), **fixed)


def parameter_args(parameters: Mapping[str, Any]) -> list[str]:
    """`--<parameter_id>=<value>` flags, as Vertex HPT appends them to a trial's args.

    kfp.local turns numbers inside dicts into floats: integral values are written as ints.
    """
    return [flag(name, value) for name, value in sorted(parameters.items())]
