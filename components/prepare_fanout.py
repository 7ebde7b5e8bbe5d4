"""Pipeline steps: the dataset prepared as the engine's parallel tasks (plan, groups, finish).

Vertex and Kubeflow with `prepare_workers` > 1 (`pipelines/pipeline.py`): `plan_dataset`
writes `plan.json` and returns the groups of shard files, a `dsl.ParallelFor` runs
`prepare_group` once per group, at most `prepare_workers` at once, and `finish_dataset`
(given every group's files with `dsl.Collected`) writes `metadata.json` and outputs the
dataset the other steps read. The work is `dataprep/fanout_steps.py`'s.
"""

from kfp import dsl

from components.base import component


@component
def plan_dataset(
    source: str,
    image_size: int,
    validation_fraction: float,
    test_fraction: float,
    seed: int,
    shared_root: str,
    max_bad_fraction: float,
    record_format: str,
    prepare_workers: int,
    planned: dsl.Output[dsl.Dataset],
) -> list:
    """Plan `source`'s shards into `planned`'s folder; return `prepare_workers` groups of files.

    Args:
        source: ``sample``, ``tfds:<name>`` or an image folder (gs:// on a cluster).
        image_size: Side of the square images.
        validation_fraction: Share of train carved out as validation if the source has none.
        test_fraction: Share of train carved out as test if the source has none.
        seed: Seed of the split membership and order.
        shared_root: As for `prepare_dataset` (a PVC's mount path on Kubeflow, or empty).
        max_bad_fraction: Share of unreadable images skipped (checked by the finish step).
        record_format: ``raw``, ``encoded`` (JPEG) or ``auto``.
        prepare_workers: How many groups the shard tasks are dealt into.
        planned: The dataset's folder: `plan.json` now, the shards and metadata later.
    """
    import json

    from pipelines.jobs import step_process
    from pipelines.jobs.trainer_args import shared_location

    options = {
        "source": source,
        "groups": int(prepare_workers),
        "image_size": int(image_size),
        "validation_fraction": float(validation_fraction),
        "test_fraction": float(test_fraction),
        "seed": int(seed),
        "max_bad_fraction": float(max_bad_fraction),
        "record_format": record_format,
    }
    location = shared_location(planned, shared_root)
    return list(
        step_process.run_module(
            "dataprep.fanout_steps",
            ["plan", f"--location={location}", f"--options={json.dumps(options)}"],
        )
    )


@component
def prepare_group(planned: dsl.Input[dsl.Dataset], files: list) -> list:
    """Write the shards `files` of `planned`'s plan (one ParallelFor iteration); return them."""
    import json

    from pipelines.jobs import step_process
    from pipelines.jobs.trainer_args import artifact_location

    location = artifact_location(planned)
    args = ["group", f"--location={location}", f"--files={json.dumps(list(files))}"]
    return list(step_process.run_module("dataprep.fanout_steps", args))


@component
def finish_dataset(
    planned: dsl.Input[dsl.Dataset], written: list, dataset: dsl.Output[dsl.Dataset]
):
    """Write `metadata.json` once every group is written (`written`); `dataset` points there."""
    import json

    from pipelines.jobs import dataset_artifact, step_process
    from pipelines.jobs.trainer_args import LOCATION_KEY, artifact_location

    location = artifact_location(planned)
    args = ["finish", f"--location={location}", f"--files={json.dumps(list(written))}"]
    result = step_process.run_module("dataprep.fanout_steps", args)
    dataset.metadata[LOCATION_KEY] = location  # the shards are in the plan step's folder
    dataset_artifact.describe(dataset, result)
