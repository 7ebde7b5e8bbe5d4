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
    """
    import posixpath

    from dataprep.prepare import prepare_dataset as prepare
    from dataprep.prepare import report_lines
    from pipelines.jobs.trainer_args import shared_location
    from trainer import records

    # On Vertex the artifact is a gs:// URI: written through TF's GCS file system,
    # metadata.json last (gcsfuse under /gcs cannot rename directories).
    location = shared_location(dataset, shared_root)
    metadata = prepare(
        source,
        location,
        image_size=int(image_size),
        validation_fraction=float(validation_fraction),
        test_fraction=float(test_fraction),
        seed=int(seed),
        overwrite=True,  # the artifact location belongs to this task (a retry rewrites it)
        progress=report_lines(lambda line: print(line, flush=True)),
    )
    digest = records.file_digest(posixpath.join(location, records.METADATA_FILE))
    dataset.metadata.update(
        {
            "source": metadata["source"],
            "class_names": metadata["class_names"],
            "num_classes": len(metadata["class_names"]),
            "image_shape": metadata["image_shape"],
            "counts": {split: s["count"] for split, s in metadata["splits"].items()},
            "skipped_images": len(metadata["skipped"]),
            "seed": metadata["seed"],
            "format_version": metadata["format_version"],
            "metadata_sha256": digest["sha256"],
        }
    )
