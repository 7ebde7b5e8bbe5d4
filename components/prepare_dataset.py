"""Pipeline step: prepare the dataset once for every trial and the final training."""

from kfp import dsl

from components.base import component


@component
def prepare_dataset(
    source: str,
    image_size: int,
    validation_fraction: float,
    test_fraction: float,
    seed: int,
    shared_root: str,
    dataset: dsl.Output[dsl.Dataset],
    max_bad_fraction: float,
    record_format: str,
    prepare_workers: int,
    dataset_dir: str,
):
    """Decode, resize and shard `source` into the `dataset` artifact (see dataprep.prepare).

    No defaults here: the pipeline passes the settings, whose defaults are the
    trainer contract's `PREPARATION`.

    Args:
        source: ``sample``, ``tfds:<name>`` or an image folder (local or gs://).
        dataset: The prepared dataset; its metadata carries the source, class names,
            counts, image shape and the sha256 of ``metadata.json`` for lineage.
        image_size: Side of the square images.
        validation_fraction: Share of train carved out as validation if the source has none.
        test_fraction: Share of train carved out as test if the source has none.
        seed: Seed of the split membership and order.
        shared_root: A volume every pod mounts (Kubeflow with a PVC): the dataset is
            written there and its `location` recorded; empty: at the artifact itself.
        max_bad_fraction: Share of unreadable images skipped (and listed) before failing.
        record_format: How images are stored: ``raw``, ``encoded`` (JPEG) or ``auto``.
        prepare_workers: Shard tasks at once (1: this process; more: processes).
        dataset_dir: The local run's folder for this source and these settings (a finished
            dataset there reused, an interrupted one resumed); empty: this task's own.
    """
    from pipelines.jobs import dataset_artifact, step_process
    from pipelines.jobs.trainer_args import LOCATION_KEY, shared_location

    # On Vertex the artifact is a gs:// URI: written through TF's GCS file system,
    # metadata.json last (gcsfuse under /gcs cannot rename directories). TensorFlow's
    # half runs in a process of its own: forked from the run's preloaded process in a
    # local run, started afresh in this image elsewhere (see step_process).
    location = dataset_dir or shared_location(dataset, shared_root)
    dataset.metadata.update({LOCATION_KEY: dataset_dir} if dataset_dir else {})
    result = step_process.run_module(
        "dataprep.prepare",
        [
            f"--source={source}",
            f"--output={location}",
            f"--image_size={int(image_size)}",
            f"--validation_fraction={float(validation_fraction)}",
            f"--test_fraction={float(test_fraction)}",
            f"--seed={int(seed)}",
            f"--max_bad_fraction={float(max_bad_fraction)}",
            f"--record_format={record_format}",
            f"--prepare_workers={int(prepare_workers)}",
            "--overwrite",  # the location is this task's (a retry keeps its finished shards)
            *(["--reuse"] if dataset_dir else []),
        ],
    )
    dataset_artifact.describe(dataset, result)
