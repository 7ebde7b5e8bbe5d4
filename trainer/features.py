"""`python -m trainer.features`: a frozen backbone's outputs, computed once per study.

    python -m trainer.features --data DATA_DIR --output FEATURES_DIR --model M
        --weights W --precision P --trainable_blocks 0,2 [--batch_size N] [--max_bytes N]

`--model` and `--trainable_blocks` may repeat, paired in order (a study that chooses the
model: `--model A --model B --trainable_blocks 0,2 --trainable_blocks 1`); each model is
done in turn, `--weights` being each one's (unset: each model's default). For each listed
trainable_blocks value whose frozen depth (`blocks - trainable_blocks`)
is worth caching (`trainer.feature_keys`), writes the frozen prefix's outputs for the
train and validation splits as an entry under FEATURES_DIR (the test split is not
needed: evaluation runs the whole exported model on images). An entry whose keys all
match is reused; any other is recomputed. The size is estimated first and refused in
one line (exit 2) beyond the disk's free space or `--max_bytes`. Every entry is
written to a hidden folder and renamed into place: an interrupted run leaves nothing
that looks complete. Exit 0 when every entry is there, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from trainer import feature_keys
from trainer.contract import DEFAULT_PRECISION, DEFAULT_SEED, PRECISIONS, ContractError
from trainer.models import check_weights, model_spec

PROG = "features"
DEFAULT_BATCH_SIZE = 64


def _log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    """The entrypoint's flags."""
    p = argparse.ArgumentParser(prog=f"python -m {feature_keys.ENTRYPOINT}", description=__doc__)
    p.add_argument("--data", required=True, help="prepared dataset directory")
    p.add_argument("--output", required=True, help="the features folder (one entry per depth)")
    p.add_argument(
        "--model", required=True, action="append", help="a built-in pretrained backbone model"
    )
    p.add_argument("--weights", default=None, help="imagenet, none or a weights file")
    p.add_argument("--precision", default=DEFAULT_PRECISION, help=f"one of {', '.join(PRECISIONS)}")
    p.add_argument(
        "--trainable_blocks",
        required=True,
        action="append",
        help="comma-separated values, e.g. 0,2 (one per --model, in order)",
    )
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="the run's seed (a random backbone's)"
    )
    p.add_argument("--batch_size", type=int, default=DEFAULT_BATCH_SIZE, help="images per batch")
    p.add_argument("--max_bytes", type=int, default=0, help="size budget in bytes (0: the disk)")
    return p


def free_bytes(path: str) -> int | None:
    """Free bytes on the local disk that would hold `path` (None: not a local path)."""
    if "://" in path:
        return None
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    return shutil.disk_usage(probe).free


def check_size(estimate: int, output: str, max_bytes: int) -> None:
    """Refuse an estimate over the budget or the disk's free space.

    Raises:
        ContractError: One line with both figures.
    """
    if max_bytes and estimate > max_bytes:
        raise ContractError(
            f"--max_bytes={max_bytes}: the features need about {estimate} bytes; "
            "raise the budget or cache fewer trainable_blocks values"
        )
    free = free_bytes(output)
    if free is not None and estimate > free:
        raise ContractError(
            f"--output={output}: the features need about {estimate} bytes, the disk has {free} free"
        )


def _depths(args: argparse.Namespace, blocks: int, values: str) -> dict[int, list[int]]:
    """Frozen depth → the trainable_blocks values asking for it (the cacheable ones)."""
    if args.batch_size < 1:
        raise ContractError(f"--batch_size={args.batch_size}: expected an integer >= 1")
    if args.max_bytes < 0:
        raise ContractError(f"--max_bytes={args.max_bytes}: expected an integer >= 0")
    if args.precision not in PRECISIONS:
        raise ContractError(
            f"--precision={args.precision}: expected one of {', '.join(PRECISIONS)}"
        )
    depths: dict[int, list[int]] = {}
    for value in feature_keys.parse_values(values, blocks):
        if feature_keys.is_cacheable(blocks, value):
            depths.setdefault(feature_keys.frozen_depth(blocks, value), []).append(value)
        else:
            _log(f"trainable_blocks={value} not cached: the whole network trains")
    return depths


def _prefix_runner(seed: int, spec: Any, weights: str, metadata: dict[str, Any], depths: list[int]):
    """The frozen prefix as a traced function: images → one output per depth (in `depths` order).

    Seeded as the trainer seeds, so a random backbone is the trainer's backbone.
    """
    import keras
    import tensorflow as tf

    from trainer import frozen
    from trainer.models import build_model

    dtype = keras.mixed_precision.global_policy().compute_dtype
    keras.utils.set_random_seed(seed)  # as the trainer does: the same random backbone
    model = build_model(
        spec, {}, weights, metadata["image_shape"], len(metadata["class_names"]), dtype
    )
    prefix = frozen.prefix_model(model, spec, depths)

    @tf.function(autograph=False)
    def run(images: tf.Tensor) -> list[tf.Tensor]:
        found = prefix(images, training=False)
        return list(found) if isinstance(found, list | tuple) else [found]

    return run


def _write_split(
    args: argparse.Namespace, metadata: dict[str, Any], split: str, run: Any, stages: dict
) -> dict[str, Any]:
    """Write one split's features, shard by shard, into each staged entry (depth → folder).

    Returns:
        The split's record for the entries' metadata: its count and its shards' counts.
    """
    import keras
    import tensorflow as tf

    from trainer import data, feature_store, records

    scale = data.scale_fn(keras.mixed_precision.global_policy().compute_dtype)
    decode = records.decode_fn(metadata["image_shape"], records.record_format(metadata))
    count = int(metadata["splits"][split]["count"])
    shard_counts = [int(shard["count"]) for shard in metadata["splits"][split]["shards"]]
    batches = sum(math.ceil(n / args.batch_size) for n in shard_counts)
    seen, done, shards = 0, 0, []
    for shard in metadata["splits"][split]["shards"]:
        source = f"{args.data.rstrip('/')}/{shard['file']}"
        written = 0
        with contextlib.ExitStack() as stack:
            writers = {
                d: stack.enter_context(tf.io.TFRecordWriter(f"{stage.rstrip('/')}/{shard['file']}"))
                for d, stage in stages.items()
            }
            dataset = tf.data.TFRecordDataset(source).map(decode, data.AUTOTUNE).map(scale)
            for images, labels in dataset.batch(args.batch_size):
                for d, values in zip(writers, run(images), strict=True):
                    flat = tf.cast(values, tf.float32).numpy()
                    for row, label in zip(flat, labels.numpy(), strict=True):
                        writers[d].write(feature_store.encode(row, int(label)))
                written += int(labels.shape[0])
                seen += int(labels.shape[0])
                done += 1
                _log(f"{split} batch {done}/{batches} ({seen}/{count} images)")
        shards.append({"file": shard["file"], "count": written})
    return {"count": seen, "shards": shards}


def _entry_metadata(
    spec: Any,
    metadata: dict[str, Any],
    depth: int,
    keys: dict,
    splits: dict,
    seconds: float,
    cost: Any,
) -> dict[str, Any]:
    """An entry's metadata: its keys, what its features are, and where they came from."""
    from trainer import part_cost

    shape = list(feature_keys.feature_shape(spec, metadata["image_shape"], depth))
    return {
        **keys,
        "trainable_blocks": spec.blocks - depth,
        "feature_shape": shape,
        "feature_dtype": feature_keys.FEATURE_DTYPE,
        "feature_bytes": 4 * math.prod(shape),
        "class_names": metadata["class_names"],
        "splits": splits,
        "seconds": round(seconds, 3),
        part_cost.STORED_KEY: cost,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
    }


def compute(
    args: argparse.Namespace, spec: Any, weights: str, metadata: dict[str, Any], todo: dict
) -> None:
    """Compute the entries in `todo` (depth → (path, keys)) in one pass over the images."""
    from trainer import feature_store, part_cost

    started = time.perf_counter()
    depths = sorted(todo)
    run = _prefix_runner(args.seed, spec, weights, metadata, depths)
    with contextlib.ExitStack() as stack:
        stages = {d: stack.enter_context(feature_store.staged_entry(todo[d][0])) for d in depths}
        splits = {s: _write_split(args, metadata, s, run, stages) for s in feature_keys.SPLITS}
        seconds = time.perf_counter() - started
        measuring = time.perf_counter()
        costs = part_cost.measure_frozen_parts(
            spec, metadata["image_shape"], len(metadata["class_names"]), depths
        )
        _log(f"measured the frozen part's cost in {time.perf_counter() - measuring:.1f} s")
        for d in depths:
            entry = _entry_metadata(spec, metadata, d, todo[d][1], splits, seconds, costs[d])
            feature_store.write_metadata(stages[d], entry)
    for d in depths:
        _log(f"wrote {todo[d][0]} ({time.perf_counter() - started:.1f} s)")


def _todo(
    args: argparse.Namespace,
    spec: Any,
    weights: str,
    metadata: dict[str, Any],
    policy: str,
    depths: dict[int, list[int]],
) -> dict[int, tuple[str, dict[str, Any]]]:
    """The entries to compute (depth → (path, keys)): those with no entry whose keys all match.

    Logs each entry reused and why each other one is computed.
    """
    from trainer import feature_store

    weights_sha = feature_store.weights_fingerprint(weights, args.seed)
    todo = {}
    for depth, values in sorted(depths.items()):
        started = time.perf_counter()
        path = feature_store.entry_dir(args.output, spec.name, depth)
        keys = feature_store.expected_keys(
            spec.name,
            weights,
            metadata["image_shape"],
            policy,
            depth,
            args.data,
            args.seed,
            weights_sha,
        )
        found, why = feature_store.lookup(path, keys)
        if found is not None:
            _log(
                f"reused {path} for trainable_blocks={','.join(map(str, values))} "
                f"({time.perf_counter() - started:.1f} s; computing it took "
                f"{found.get('seconds', 0):.1f} s)"
            )
        else:
            _log(f"computing {path} for trainable_blocks={','.join(map(str, values))}: {why}")
            todo[depth] = (path, keys)
    return todo


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (the first model's that is not 0)."""
    args = build_parser().parse_args(argv)
    if len(args.model) != len(args.trainable_blocks):
        print(
            f"{PROG}: error: {len(args.model)} --model for {len(args.trainable_blocks)} "
            "--trainable_blocks: expected one --trainable_blocks per --model",
            file=sys.stderr,
        )
        return 2
    for model, values in zip(args.model, args.trainable_blocks, strict=True):
        code = _one_model(args, model, values)
        if code:
            return code
    return 0


def _one_model(args: argparse.Namespace, model: str, values: str) -> int:
    """Cache `model`'s frozen prefixes for the trainable_blocks `values`; the exit code."""
    try:
        spec = model_spec(model)
        weights = check_weights(spec, args.weights)
        if not spec.blocks:
            _log(f"nothing to cache: model {spec.name} declares no frozen backbone blocks")
            return 0
        depths = _depths(args, spec.blocks, values)
    except ContractError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    if not depths:
        _log(f"nothing to cache for {spec.name}")
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    from trainer import records, train

    try:
        metadata = records.read_metadata(args.data)
        train.check_image_shape(spec, metadata["image_shape"], args.data)
        choice = train.resolve_precision(args.precision)
        if weights not in ("imagenet", "none") and not tf.io.gfile.exists(weights):
            raise ContractError(
                f"--weights={weights}: no such file (expected a Keras weights file)"
            )
        todo = _todo(args, spec, weights, metadata, choice.policy, depths)
        if not todo:
            return 0
        counts = {s: int(metadata["splits"][s]["count"]) for s in feature_keys.SPLITS}
        estimate = feature_keys.estimate_bytes(spec, metadata["image_shape"], counts, todo)
        check_size(estimate, args.output, args.max_bytes)
        _log(f"{choice.line}; about {estimate} bytes for {len(todo)} entry(ies)")
        keras.mixed_precision.set_global_policy(choice.policy)
        try:
            compute(args, spec, weights, metadata, todo)
        finally:
            keras.mixed_precision.set_global_policy("float32")
    except (records.DatasetError, ContractError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
