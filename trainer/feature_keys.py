"""What a frozen backbone's feature cache is, TF-free: its flag, entries, keys and size.

A pretrained backbone's frozen prefix (its preprocessing and the bottom
`blocks - trainable_blocks` blocks, BatchNorm in inference mode, no augmentation) is a
pure function of the image, so `python -m trainer.features` computes it once per
study and the trainer's `--features` flag trains only the part that trains on it.
The pipeline side imports this module to decide which trainable_blocks values are
worth a cache, and to estimate its size before anything runs; it never imports
TensorFlow.

An entry is one folder per (model, frozen depth) under the features folder, written
atomically, holding `metadata.json` (the keys below) and TFRecord shards mirroring
the dataset's own shards (same file names, same record order), so sharding across
workers and the shuffle order are those of the images. The keys: the model, the
weights (`imagenet`/`none` by name, a file by its sha256), the image shape, the
precision policy resolved on the machine that computed it, the depth and the
dataset's fingerprint (the sha256 of its metadata.json, which lists every shard's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainer.contract import ContractError
from trainer.models import ModelSpec

FEATURES_FLAG = "features"  # the trainer's `--features FEATURES_DIR` ("" = off)
ENTRYPOINT = "trainer.features"  # `python -m trainer.features ...`
FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
SPLITS = ("train", "validation")  # what trials and the final job train and validate on
FEATURE_DTYPE = "float32"  # stored as float32 (a bf16 value converts exactly)
KEY_FIELDS = (
    "model",
    "weights",
    "weights_fingerprint",
    "image_shape",
    "precision",
    "frozen_depth",
    "dataset_fingerprint",
)
# Bytes of one TFRecord example beyond its feature values (framing, keys, label).
RECORD_OVERHEAD = 64


def frozen_depth(blocks: int, trainable_blocks: int) -> int:
    """Blocks of the backbone that do not train, counted from the bottom."""
    return int(blocks) - int(trainable_blocks)


def is_cacheable(blocks: int, trainable_blocks: int) -> bool:
    """Whether a trial with `trainable_blocks` has a frozen prefix worth caching.

    A model with no declared blocks (`blocks == 0`: the CNN, a team's builder) is never
    cached; neither is a trial whose whole network trains.
    """
    return blocks > 0 and 0 <= int(trainable_blocks) < blocks


def cacheable_values(blocks: int, values: Iterable[Any]) -> list[int]:
    """The trainable_blocks values among `values` worth a cache, sorted, each once."""
    found = set()
    for value in values:
        number = float(value)
        if number.is_integer() and is_cacheable(blocks, int(number)):
            found.add(int(number))
    return sorted(found)


def parse_values(text: str, blocks: int) -> list[int]:
    """`0,2` → [0, 2], every value an integer in [0, blocks].

    Raises:
        ContractError: One line naming the bad value and what is expected.
    """
    values = []
    for part in text.split(","):
        try:
            number = float(part)
        except ValueError:
            number = math.nan
        if not number.is_integer() or not 0 <= number <= blocks:
            raise ContractError(
                f"--trainable_blocks={text}: expected comma-separated integers in [0, {blocks}]"
            )
        values.append(int(number))
    return values


def entry_name(model: str, depth: int) -> str:
    """The entry's folder name under the features folder, e.g. `resnet50-frozen5`."""
    return f"{model}-frozen{depth}"


def feature_shape(spec: ModelSpec, image_shape: Sequence[int], depth: int) -> tuple[int, ...]:
    """The shape of one image's features at `depth` (the whole backbone: pooled).

    The shapes are the spec's `BackboneSpec.block_outputs`.

    Raises:
        ContractError: The model declares no block outputs, or `depth` is not one of them.
    """
    outputs = spec.backbone.block_outputs if spec.backbone else ()
    if not outputs or not 1 <= depth <= len(outputs):
        raise ContractError(f"model {spec.name!r} has no cacheable frozen depth {depth}")
    stride, channels = outputs[depth - 1]
    if depth == len(outputs):
        return (channels,)
    height, width = (math.ceil(int(side) / stride) for side in image_shape[:2])
    return (height, width, channels)


def estimate_bytes(
    spec: ModelSpec, image_shape: Sequence[int], counts: Mapping[str, int], depths: Iterable[int]
) -> int:
    """Bytes the entries at `depths` take for splits of `counts` images (float32 values)."""
    total = 0
    for depth in depths:
        values = math.prod(feature_shape(spec, image_shape, depth))
        per_example = values * 4 + RECORD_OVERHEAD
        total += sum(int(counts[split]) * per_example for split in SPLITS)
    return total


def mismatches(expected: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """The keys that differ, as `key: found != expected` phrases (empty: usable)."""
    return [
        f"{key}: {found.get(key)!r} != {expected[key]!r}"
        for key in KEY_FIELDS
        if _comparable(found.get(key)) != _comparable(expected[key])
    ]


def _comparable(value: Any) -> Any:
    return [int(v) for v in value] if isinstance(value, list | tuple) else value
