"""The trainer's command line inside a job payload, and artifact locations the trainer can read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRAINER_COMMAND = ["python", "-m", "trainer.task"]


def artifact_location(artifact: Any) -> str:
    """Where a job reads or writes an artifact: its gs:// URI on Vertex, its local path here."""
    uri = str(artifact.uri)
    return uri if uri.startswith("gs://") else str(artifact.path)


def trainer_args(
    dataset: Any, *, epochs: int, batch_size: int, metric_tag: str, precision: str
) -> list[str]:
    """Fixed trainer flags shared by every trial and the final job."""
    return [
        f"--data={artifact_location(dataset)}",
        f"--epochs={int(epochs)}",
        f"--batch_size={int(batch_size)}",
        f"--metric_tag={metric_tag}",
        f"--precision={precision}",
    ]


def parameter_args(parameters: Mapping[str, Any]) -> list[str]:
    """`--<parameter_id>=<value>` flags, as Vertex HPT appends them to a trial's args.

    kfp.local turns numbers inside dicts into floats: integral values are written as ints.
    """
    args = []
    for name, value in sorted(parameters.items()):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        args.append(f"--{name}={value}")
    return args
