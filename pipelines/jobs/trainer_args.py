"""The trainer's command line inside a job payload, and artifact locations the trainer can read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.contract import flag

TRAINER_COMMAND = ["python", "-m", "trainer.task"]


def artifact_location(artifact: Any) -> str:
    """Where a job reads or writes an artifact: its gs:// URI on Vertex, its local path here."""
    uri = str(artifact.uri)
    return uri if uri.startswith("gs://") else str(artifact.path)


def trainer_args(
    dataset: Any, *, epochs: int, batch_size: int, metric_tag: str, precision: str, seed: int
) -> list[str]:
    """Fixed trainer flags shared by every trial and the final job."""
    return [
        flag("data", artifact_location(dataset)),
        flag("epochs", int(epochs)),
        flag("batch_size", int(batch_size)),
        flag("metric_tag", metric_tag),
        flag("precision", precision),
        flag("seed", int(seed)),
    ]


def parameter_args(parameters: Mapping[str, Any]) -> list[str]:
    """`--<parameter_id>=<value>` flags, as Vertex HPT appends them to a trial's args.

    kfp.local turns numbers inside dicts into floats: integral values are written as ints.
    """
    return [flag(name, value) for name, value in sorted(parameters.items())]
