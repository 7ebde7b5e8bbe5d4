"""The prepared dataset's artifact: what its metadata says for lineage and for the steps after.

One place for both ways a pipeline prepares: the single `Prepare dataset` step and the fan-out's
finish step (`components/prepare_fanout.py`) record the same keys from the preparation's result
(`python -m dataprep.prepare` or `python -m dataprep.fanout_steps finish`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def describe(dataset: Any, result: Mapping[str, Any]) -> None:
    """Record a preparation's `result` (its metadata, `metadata.json`'s sha256) on `dataset`."""
    metadata = result["metadata"]
    dataset.metadata.update(
        {
            "source": metadata["source"],
            "class_names": metadata["class_names"],
            "num_classes": len(metadata["class_names"]),
            "image_shape": metadata["image_shape"],
            "counts": {split: s["count"] for split, s in metadata["splits"].items()},
            "skipped_images": len(metadata["skipped"]),
            "seed": metadata["seed"],
            "record_format": metadata["record_format"],
            "format_version": metadata["format_version"],
            "metadata_sha256": result["metadata_sha256"],
        }
    )
