"""Run shard tasks: in this process, or `workers` at once in processes of their own.

Local fan-out uses the standard library's `concurrent.futures.ProcessPoolExecutor`
(spawned processes: TensorFlow's threads do not survive a fork). Each worker gets the
opened source once, when it starts, and then only its tasks. Results come back in task
order, so the metadata is the same whatever `workers` is.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable, Generator, Sequence

from dataprep import shards
from dataprep.sources import Source

# The source a worker process was started with (set by `_start_worker`).
_worker_source: list[Source] = []


def run_tasks(
    source: Source,
    tasks: Sequence[shards.ShardTask],
    directory: str,
    *,
    image_shape: Sequence[int],
    stored: str,
    workers: int,
    advance: Callable[[int], None],
) -> Generator[shards.ShardResult, None, None]:
    """Write every task's shard into `directory`, `workers` at a time; yield results in order.

    In this process, a split's tasks share reads (`shards.groups`); `advance` is called with
    the number of readable images written: per batch here, per finished task from workers.
    """
    if workers <= 1 or len(tasks) <= 1:
        for group in shards.groups(tasks):
            yield from shards.write_shards(
                source, group, directory, image_shape=image_shape, stored=stored, advance=advance
            )
        return
    executor = concurrent.futures.ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(source.for_tasks(),),
    )
    try:
        results = executor.map(
            _run_task,
            tasks,
            [directory] * len(tasks),
            [tuple(image_shape)] * len(tasks),
            [stored] * len(tasks),
        )
        for result in results:
            advance(result.shard["count"])
            yield result
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _start_worker(source: Source) -> None:
    """A worker process's initializer: keep the source its tasks read."""
    _worker_source[:] = [source]


def _run_task(
    task: shards.ShardTask, directory: str, image_shape: tuple[int, ...], stored: str
) -> shards.ShardResult:
    """One task in a worker process."""
    return shards.write_shard(
        _worker_source[0], task, directory, image_shape=image_shape, stored=stored
    )
