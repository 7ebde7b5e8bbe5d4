"""Keep what an interrupted preparation finished: a rerun of the same plan writes only the rest.

A shard task leaves a receipt once its file is complete (`shards.write_receipt`). A rerun
into the same stage compares its plan with the stage's `plan.json` (`shards.PLAN_IDENTITY`:
the source, its listing and split membership as the tasks hold them, the image shape, the
record format): the same plan keeps every shard whose file is there with its receipt's
size and sha256; another plan empties the stage and starts clean. Either way it is said in
one line. A finished dataset of the same plan can be kept whole (`finished_dataset`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from dataprep import shards
from trainer import records


def kept_shards(stage: str, plan: Mapping[str, Any]) -> tuple[dict[str, shards.ShardResult], str]:
    """Ready `stage` for `plan`: the finished shards kept by file, and a line saying so ('': none).

    Args:
        stage: The folder the shards are written in (local or gs://), perhaps left by an
            interrupted run.
        plan: This run's `shards.plan_document`.
    """
    earlier = shards.read_plan(stage)
    if earlier is None:
        _empty(stage)  # nothing planned there yet: nothing to keep
        return {}, ""
    if any(earlier.get(key) != plan[key] for key in shards.PLAN_IDENTITY):
        _empty(stage)
        return {}, (
            f"{stage}: an interrupted preparation of another plan (other source files, split, "
            "image size or record format); started clean"
        )
    tasks = shards.tasks_of(plan)
    kept = {t.file: r for t in tasks if (r := shards.read_receipt(stage, t)) is not None}
    if not kept:
        return {}, ""
    return kept, (
        f"kept {len(kept)} of {len(tasks)} shard(s) an interrupted preparation of the same plan "
        f"had written ({stage}); writing the other {len(tasks) - len(kept)}"
    )


def finished_dataset(output: str, plan: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The metadata of a finished dataset of `plan` at `output` whose shards are all intact.

    Returns (None, '') when `output` holds no finished dataset, (None, a line saying why)
    when it holds one that cannot be kept (another plan, a shard changed since), else
    (its metadata, '').
    """
    try:
        metadata = records.read_metadata(output)
    except records.DatasetError:
        return None, ""
    earlier = shards.read_plan(output)
    if earlier is None or any(earlier.get(key) != plan[key] for key in shards.PLAN_IDENTITY):
        return None, f"{output}: a dataset of another plan; preparing it again"
    for split in records.SPLITS:
        for shard in metadata["splits"][split]["shards"]:
            if not shards.intact(output, shard):
                return None, (
                    f"{output}: {shard['file']} is not the shard its metadata lists "
                    "(missing, or another size or sha256); preparing it again"
                )
    return metadata, ""


def in_plan_order(
    tasks: Sequence[shards.ShardTask],
    kept: Mapping[str, shards.ShardResult],
    written: Iterable[shards.ShardResult],
) -> Iterator[shards.ShardResult]:
    """Every task's result in plan order: kept ones, and `written` (the others', in order)."""
    fresh = iter(written)
    for task in tasks:
        yield kept[task.file] if task.file in kept else next(fresh)


def drop_receipts(directory: str) -> None:
    """Remove the receipts once the metadata lists every shard (they said nothing more)."""
    folder = posixpath.join(directory, shards.RECEIPTS_DIR)
    if tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)


def _empty(stage: str) -> None:
    """Remove everything in `stage` (an earlier plan's files), keeping the folder."""
    for name in tf.io.gfile.listdir(stage):
        path = posixpath.join(stage, name.rstrip("/"))
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)
