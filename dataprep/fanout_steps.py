"""Preparation as the pipeline engine's parallel tasks: plan, groups of shard tasks, finish.

On Vertex and Kubeflow with `prepare_workers` > 1 the compiled pipeline prepares in three
kinds of steps (`components/prepare_fanout.py`), each running `python -m
dataprep.fanout_steps <step> …` as a process of its own:

* **plan**: list the source, plan the splits and shards (`dataprep.shards.plan_shards`), write
  `plan.json` into the dataset's folder and print the groups: `groups` runs of consecutive
  tasks, as even in size as the tasks allow.
* **group** (one per `dsl.ParallelFor` iteration): write the group's shards with the code a
  single process runs (`dataprep.fanout.run_tasks`), each with its receipt; shards whose
  receipt is already there (a retried iteration) are kept.
* **finish** (after every group, `dsl.Collected`): check every planned shard is there, count
  skipped images against `max_bad_fraction`, write `metadata.json` last.

The shards are written in place (each as ``<file>.partial``, renamed when complete) and
`metadata.json` last, so a reader never finds a complete-looking partial dataset.
"""

from __future__ import annotations

import argparse
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from trainer.gc_pause import collector_paused

with collector_paused():
    import tensorflow as tf

    from dataprep import fanout, prepare, resume, shards, summary
    from dataprep.sources import PreparationError, open_source, task_source
    from trainer import records
    from trainer.contract import PREPARATION, record_format_for


def plan_groups(location: str, options: Mapping[str, Any]) -> list[list[str]]:
    """Plan the shards into `location`'s `plan.json`; return the groups' shard files.

    `options`: `source`, `groups` (how many), and `image_size`, `validation_fraction`,
    `test_fraction`, `seed`, `max_bad_fraction`, `record_format` as `prepare_dataset` takes them.
    """
    source, groups = options["source"], options["groups"]
    image_size, seed = options["image_size"], options["seed"]
    validation_fraction, test_fraction = options["validation_fraction"], options["test_fraction"]
    max_bad_fraction, record_format = options["max_bad_fraction"], options["record_format"]
    prepare.check_options(
        image_size=image_size,
        validation_fraction=validation_fraction,
        test_fraction=test_fraction,
        seed=seed,
        channels=PREPARATION.channels,
        max_bad_fraction=max_bad_fraction,
        num_shards=prepare.DEFAULT_NUM_SHARDS,
    )
    prepare.check_storage(record_format=record_format, prepare_workers=groups)
    image_shape = (image_size, image_size, PREPARATION.channels)
    stored = record_format_for(record_format, image_size)
    with open_source(source) as opened:
        plans = prepare.plan(
            opened, validation_fraction=validation_fraction, test_fraction=test_fraction, seed=seed
        )
        tasks = shards.plan_shards(plans, image_shape, prepare.DEFAULT_NUM_SHARDS)
        total = sum(len(p.items) for p in plans.values())
        document = shards.plan_document(
            tasks, source=opened.spec, image_shape=image_shape, stored=stored
        )
        document["about"] = summary.source_part(opened, total)
    document["options"] = {
        "record_format": stored,
        "seed": seed,
        "validation_fraction": validation_fraction,
        "test_fraction": test_fraction,
        "max_bad_fraction": max_bad_fraction,
    }
    tf.io.gfile.makedirs(location)  # the artifact's folder (on a volume; nothing on gs://)
    shards.write_plan(location, document)
    return split_evenly([task.file for task in tasks], groups)


def split_evenly(files: Sequence[str], groups: int) -> list[list[str]]:
    """`files` in at most `groups` runs of consecutive files, sizes differing by one at most."""
    count = max(1, min(groups, len(files)))
    size, extra = divmod(len(files), count)
    starts = [index * size + min(index, extra) for index in range(count + 1)]
    return [list(files[starts[i] : starts[i + 1]]) for i in range(count)]


def write_group(location: str, files: Sequence[str]) -> list[str]:
    """Write the shards `files` of `location`'s plan (those without a receipt); return `files`."""
    plan = _plan(location)
    wanted = set(files)
    tasks = [task for task in shards.tasks_of(plan) if task.file in wanted]
    missing = wanted - {task.file for task in tasks}
    if missing:
        raise PreparationError(f"{location}: shards {sorted(missing)} are not in its plan")
    todo = [task for task in tasks if shards.read_receipt(location, task) is None]
    print(f"writing {len(todo)} of the group's {len(tasks)} shard(s)", flush=True)
    done = [0]

    def advance(count: int) -> None:
        done[0] += count
        print(f"prepared {done[0]} images", flush=True)

    for _ in fanout.run_tasks(
        task_source(plan["source"]),
        todo,
        location,
        image_shape=plan["image_shape"],
        stored=plan["record_format"],
        workers=1,
        advance=advance,
    ):
        pass
    return list(files)


def finish(location: str, written: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Write `metadata.json` once every group (`written`: their files) is done; return it.

    Raises:
        PreparationError: A planned shard missing (its group did not write it), or more
            unreadable images than the plan's `max_bad_fraction` allows.
    """
    plan = _plan(location)
    tasks = shards.tasks_of(plan)
    reported = {file for files in written for file in files}
    results = [shards.read_receipt(location, task) for task in tasks]
    lost = [
        t.file for t, r in zip(tasks, results, strict=True) if r is None or t.file not in reported
    ]
    if lost:
        raise PreparationError(
            f"{location}: {len(lost)} planned shard(s) not written, first {lost[0]}; "
            "expected every group to finish"
        )
    about, options = plan["about"], plan["options"]
    opened = task_source(plan["source"])
    opened.class_names = list(about["class_names"])
    image_shape = plan["image_shape"]
    skipped = summary.SkippedImages(
        plan["source"], about["source_images"], options["max_bad_fraction"], image_shape
    )
    splits = summary.Splits(plan["source"], opened, summary.Counter(0, None), skipped)
    for result in results:
        assert result is not None
        splits.add(result)
    metadata = summary.described(about, image_shape, skipped, splits.summaries(), options)
    records.write_metadata(location, metadata)
    resume.drop_receipts(location)  # kept until the metadata lists every shard
    return {"format_version": records.FORMAT_VERSION, **metadata}


def _plan(location: str) -> dict[str, Any]:
    plan = shards.read_plan(location)
    if plan is None:
        raise PreparationError(
            f"{location}: no {shards.PLAN_FILE}; expected the plan step's output"
        )
    return plan


def main(argv: Sequence[str] | None = None) -> int:
    """`plan`, `group` or `finish`; the step's result as JSON to `--result`."""
    parser = argparse.ArgumentParser(prog="python -m dataprep.fanout_steps", description=__doc__)
    parser.add_argument("step", choices=["plan", "group", "finish"])
    parser.add_argument("--location", required=True, help="the dataset's folder (local or gs://)")
    parser.add_argument("--options", default="{}", help="plan: its keyword options as JSON")
    parser.add_argument("--files", default="[]", help="group: its files; finish: every group's")
    parser.add_argument("--result", required=True, help="local file for the result (JSON)")
    args = parser.parse_args(argv)
    if args.step == "plan":
        result: Any = plan_groups(args.location, json.loads(args.options))
    elif args.step == "group":
        result = write_group(args.location, json.loads(args.files))
    else:
        metadata = finish(args.location, json.loads(args.files))
        for line in prepare.skipped_lines(metadata):
            print(line, flush=True)
        digest = records.file_digest(posixpath.join(args.location, records.METADATA_FILE))
        result = {"metadata": metadata, "metadata_sha256": digest["sha256"]}
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())
