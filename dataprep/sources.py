"""Where images come from: an image folder (local or gs://), a TFDS dataset, or the offline sample.

A source lists its labelled items per split it provides (``train``, and
``validation`` / ``test`` when it has them) and reads the encoded bytes of any
subset of them. It never decodes: every source goes through the same decode
and resize in `dataprep.prepare`.

Source specs: ``sample``, ``tfds:<name>`` (e.g. ``tfds:horses_or_humans``), or
a folder laid out ``<class>/*`` or ``<split>/<class>/*``.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import gzip
import importlib.metadata
import io
import os
import posixpath
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from trainer import records
from trainer.contract import IMAGE_EXTENSIONS  # what decode_image reads

SAMPLE = "sample"
TFDS_PREFIX = "tfds:"
DIGITS_CSV = "digits.csv.gz"  # the sample: scikit-learn's bundled digits (`digits()`)
LAYOUTS = "<class>/* or <split>/<class>/* with split in train, validation, test"
# tf.data functions here are plain ops: autograph's conversion of each only costs start-up
# time (0.3 s of a 2.4 s sample preparation, measured with cProfile).
plain = tf.autograph.experimental.do_not_convert


class PreparationError(ValueError):
    """Bad input to dataset preparation; the message is one line naming the value."""


class Item(NamedTuple):
    """One labelled image of a source: `key` names it (a relative path, or split/index)."""

    key: str
    label: int


@dataclasses.dataclass
class Source(abc.ABC):
    """A labelled image source.

    Attributes:
        spec: The spec it was opened from (recorded in the metadata).
        description: What it is, for people (recorded in the metadata).
        class_names: Label names, index = label.
        splits: Items of every split the source provides, in a stable order.
    """

    spec: str
    description: str
    class_names: list[str]
    splits: dict[str, list[Item]]

    @abc.abstractmethod
    def read(self, split: str, items: Sequence[tuple[str, int]]) -> tf.data.Dataset:
        """(encoded image bytes, label, key) of `items` (key, label) of `split`.

        Folder and in-memory sources keep the items' order; a TFDS source its stored order.
        """

    def for_tasks(self) -> Source:
        """What a shard task in another process needs: this source without its listing."""
        return dataclasses.replace(self, splits={})


@dataclasses.dataclass
class FolderSource(Source):
    """Image files under `root`, one folder per class; `ignored`: the other files there.

    `nested`: folders inside a class folder, with the images under each; they are not
    read (a class folder holds its images directly) and are said, never dropped silently.
    """

    root: str = ""
    ignored: list[str] = dataclasses.field(default_factory=list)
    nested: dict[str, int] = dataclasses.field(default_factory=dict)

    def for_tasks(self) -> Source:
        """The folder's root only."""
        return dataclasses.replace(self, splits={}, ignored=[], nested={})

    def read(self, split: str, items: Sequence[tuple[str, int]]) -> tf.data.Dataset:
        """Read the items' files (local or gs://)."""
        del split  # the keys already hold the split folder
        keys = [key for key, _ in items]
        paths = [posixpath.join(self.root, key) for key in keys]
        labels = [label for _, label in items]
        dataset = tf.data.Dataset.from_tensor_slices((paths, labels, keys))
        return dataset.map(
            plain(lambda path, label, key: (tf.io.read_file(path), label, key)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )


@dataclasses.dataclass
class MemorySource(Source):
    """Encoded images held in memory, by key (the bundled sample)."""

    encoded: dict[str, bytes] = dataclasses.field(default_factory=dict)

    def read(self, split: str, items: Sequence[tuple[str, int]]) -> tf.data.Dataset:
        """The items' bytes as they are held."""
        del split  # keys are unique across the source
        keys = [key for key, _ in items]
        labels = [label for _, label in items]
        return tf.data.Dataset.from_tensor_slices(([self.encoded[k] for k in keys], labels, keys))


@dataclasses.dataclass
class TfdsSource(Source):
    """A TFDS image-classification dataset, read with its images left encoded."""

    builder: Any = None

    def for_tasks(self) -> Source:
        """Without the builder: a task's process opens the (already prepared) one again."""
        return dataclasses.replace(self, builder=None)

    def read(self, split: str, items: Sequence[tuple[str, int]]) -> tf.data.Dataset:
        """Stream `split` in its stored order and keep the items (keys are ``split/index``)."""
        if self.builder is None:
            self.builder = _builder(self.spec)
        wanted = np.zeros(len(self.splits[split]), dtype=bool)
        wanted[[int(key.rsplit("/", 1)[1]) for key, _ in items]] = True
        dataset = _tfds_split(self.builder, split).enumerate()
        dataset = dataset.filter(plain(lambda index, example: tf.gather(wanted, index)))
        return dataset.map(
            plain(
                lambda index, example: (
                    example[0],
                    example[1],
                    tf.strings.join([split, tf.strings.as_string(index)], "/"),
                )
            )
        )


@contextlib.contextmanager
def open_source(spec: str) -> Iterator[Source]:
    """Open a source spec: ``sample``, ``tfds:<name>`` or an image folder.

    Raises:
        PreparationError: Unknown TFDS name, missing or empty folder, fewer than two
            classes, a split or class with no images.
    """
    if spec == SAMPLE:
        yield sample_source()
    elif spec.startswith(TFDS_PREFIX):
        yield tfds_source(spec)
    else:
        yield folder_source(spec)


def task_source(spec: str) -> Source:
    """What shard tasks read from, in a process of their own: a folder is not listed again.

    A fan-out's group and finish steps (`dataprep.fanout_steps`) read only the files their
    plan names; the sample and TFDS sources are opened as they are for the plan.
    """
    if spec == SAMPLE or spec.startswith(TFDS_PREFIX):
        with open_source(spec) as opened:
            return opened.for_tasks()
    root = spec.rstrip("/") or "/"
    return FolderSource(root, f"image folder {root}", [], {}, root=root)


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits, as `sklearn.datasets.load_digits` gives them, without importing it.

    `load_digits` reads the CSV that scikit-learn ships (`digits.csv.gz`: 64 pixels in
    0..16 and the label per row); this reads the same file, found through the
    distribution's file list, because importing scikit-learn costs ~0.6 s here and the
    preparation step needs nothing else from it. If the file is not listed (another
    packaging), `load_digits` itself.

    Returns:
        Images (n, 8, 8) as float64 in 0..16, and labels (n,) as int.
    """
    try:
        shipped = importlib.metadata.files("scikit-learn") or []
    except importlib.metadata.PackageNotFoundError:  # load_digits then says what is missing
        shipped = []
    listed = [f for f in shipped if f.name == DIGITS_CSV]
    if not listed:
        from sklearn.datasets import load_digits

        loaded = load_digits()
        return loaded.images, loaded.target
    with gzip.open(listed[0].locate(), "rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def sample_images() -> dict[str, tuple[bytes, int]]:
    """scikit-learn's digits as greyscale PNG bytes and label, keyed ``<digit>/<index>.png``."""
    from PIL import Image

    images_16, labels = digits()
    pixels = np.round(images_16 * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    images = {}
    for index, (image, label) in enumerate(zip(pixels, labels, strict=True)):
        encoded = io.BytesIO()
        Image.fromarray(image, mode="L").save(encoded, format="PNG")
        images[f"{label}/{index:04d}.png"] = (encoded.getvalue(), int(label))
    return images


def sample_source() -> MemorySource:
    """The offline sample, in memory: the items and order `folder_source` gives its folder."""
    images = sample_images()
    return MemorySource(
        SAMPLE,
        "scikit-learn digits: 1,797 8x8 greyscale images of 10 digits",
        class_names=[str(digit) for digit in range(10)],
        splits={"train": [Item(key, label) for key, (_, label) in sorted(images.items())]},
        encoded={key: encoded for key, (encoded, _) in images.items()},
    )


def write_sample_folder(directory: str) -> None:
    """Write the sample as ``<digit>/<index>.png`` files in a local folder (benchmarks, tests)."""
    for key, (encoded, _) in sample_images().items():
        os.makedirs(os.path.join(directory, posixpath.dirname(key)), exist_ok=True)
        with open(os.path.join(directory, key), "wb") as f:
            f.write(encoded)


def folder_source(root: str) -> FolderSource:
    """List an image folder laid out ``<class>/*`` or ``<split>/<class>/*``."""
    root = root.rstrip("/") or "/"
    _check_is_folder(root)
    folders = _split_folders(root)
    files = {
        split: {
            name: _image_files(posixpath.join(root, folder, name))
            for name in _subdirectories(posixpath.join(root, folder))
        }
        for split, folder in folders.items()
    }
    class_names = sorted({name for by_class in files.values() for name in by_class})
    _check_classes(root, class_names, files)
    ignored = [
        posixpath.join(folder, name, other)
        for split, folder in folders.items()
        for name in files[split]
        for other in _other_files(posixpath.join(root, folder, name))
    ]
    splits = {
        split: [
            Item(posixpath.join(folders[split], name, file), label)
            for label, name in enumerate(class_names)
            for file in by_class.get(name, [])
        ]
        for split, by_class in files.items()
    }
    nested = {
        posixpath.join(folder, name, sub): _images_under(posixpath.join(root, folder, name, sub))
        for split, folder in folders.items()
        for name in files[split]
        for sub in _subdirectories(posixpath.join(root, folder, name))
    }
    return FolderSource(
        root,
        f"image folder {root}",
        class_names,
        splits,
        root=root,
        ignored=ignored,
        nested=nested,
    )


def _check_is_folder(root: str) -> None:
    """Raise `PreparationError` unless `root` is a folder this machine can read."""
    if tf.io.gfile.isdir(root):
        return
    if "://" in root:  # a bucket that is not there looks the same as one we may not read
        raise PreparationError(
            f"--source={root}: no such folder, or not readable with this machine's Google "
            "Cloud credentials (gcloud auth application-default login; GOOGLE_APPLICATION_"
            "CREDENTIALS for a service account key)"
        )
    raise PreparationError(
        f"--source={root}: not a directory; expected an image folder ({LAYOUTS}), "
        f"'{SAMPLE}' or '{TFDS_PREFIX}<name>'"
    )


def _split_folders(root: str) -> dict[str, str]:
    """Split → its folder under `root`; a ``<class>/*`` folder is all train.

    Raises:
        PreparationError: Split folders without a train folder or beside class folders.
    """
    top = _subdirectories(root)
    split_dirs = [name for name in top if name in records.SPLITS]
    if split_dirs and (len(split_dirs) != len(top) or "train" not in split_dirs):
        raise PreparationError(
            f"--source={root}: top-level folders {', '.join(top)}; expected {LAYOUTS} "
            "(split folders need a train folder and no class folders beside them)"
        )
    return {split: split for split in split_dirs} or {"train": ""}


def _images_under(path: str) -> int:
    """Image files anywhere under `path`."""
    return sum(
        1
        for _, _, names in tf.io.gfile.walk(path)
        for name in names
        if name.lower().endswith(IMAGE_EXTENSIONS)
    )


def _check_classes(root: str, class_names: list[str], files: dict[str, dict[str, list]]) -> None:
    total = sum(len(names) for by_class in files.values() for names in by_class.values())
    if total == 0:
        raise PreparationError(
            f"--source={root}: no images found; expected {LAYOUTS} "
            f"with {'/'.join(IMAGE_EXTENSIONS)} files"
        )
    if len(class_names) < 2:
        raise PreparationError(
            f"--source={root}: only one class ({class_names[0]}); expected at least 2 class folders"
        )
    for name in class_names:
        if not any(by_class.get(name) for by_class in files.values()):
            raise PreparationError(f"--source={root}: class folder '{name}' has no images")
    for split, by_class in files.items():
        if not any(by_class.values()):
            raise PreparationError(f"--source={root}: split folder '{split}' has no images")


def _subdirectories(path: str) -> list[str]:
    """Sorted names of the visible subdirectories of `path` (image files are not looked at)."""
    names = (entry.rstrip("/") for entry in tf.io.gfile.listdir(path))
    return sorted(
        name
        for name in names
        if not name.startswith(".")
        and not name.lower().endswith(IMAGE_EXTENSIONS)
        and tf.io.gfile.isdir(posixpath.join(path, name))
    )


def _image_files(path: str) -> list[str]:
    """Sorted names of the JPEG/PNG/GIF/BMP files directly in `path`."""
    return sorted(
        name
        for name in tf.io.gfile.listdir(path)
        if not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)
    )


def _other_files(path: str) -> list[str]:
    """Sorted names of the files directly in `path` that are not read as images."""
    return sorted(
        name
        for name in tf.io.gfile.listdir(path)
        if (name.startswith(".") or not name.lower().endswith(IMAGE_EXTENSIONS))
        and not tf.io.gfile.isdir(posixpath.join(path, name))
    )


def tfds_source(spec: str) -> TfdsSource:
    """Prepare (download if needed) a TFDS dataset and list its labels per split."""
    import tensorflow_datasets as tfds

    try:
        builder = _builder(spec)
    except (ValueError, AssertionError) as error:  # DatasetNotFoundError is a ValueError
        reason = str(error).strip().splitlines()[0][:200]
        raise PreparationError(
            f"--source={spec}: unknown TFDS dataset ({reason}); "
            "expected a name from tfds.list_builders(), e.g. tfds:horses_or_humans"
        ) from None
    image_key, label_key = builder.info.supervised_keys or (None, None)
    features = dict(builder.info.features.items())
    if not (
        isinstance(features.get(image_key), tfds.features.Image)
        and isinstance(features.get(label_key), tfds.features.ClassLabel)
    ):
        raise PreparationError(
            f"--source={spec}: not an image classification dataset; "
            "expected supervised keys (Image, ClassLabel)"
        )
    builder.download_and_prepare()
    provided = [split for split in records.SPLITS if split in builder.info.splits]
    if "train" not in provided:
        raise PreparationError(
            f"--source={spec}: splits {', '.join(builder.info.splits) or 'none'}; "
            "expected a train split"
        )
    splits = {split: _tfds_items(builder, split) for split in provided}
    for split, items in splits.items():
        if not items:
            raise PreparationError(f"--source={spec}: split '{split}' has no images")
    return TfdsSource(
        spec,
        f"TFDS {builder.info.full_name}",
        list(features[label_key].names),
        splits,
        builder=builder,
    )


def _builder(spec: str) -> Any:
    """The TFDS builder of a ``tfds:<name>`` spec."""
    import tensorflow_datasets as tfds

    # TFDS_DATA_DIR: `hpt-pipeline run` sets it inside its output (never $HOME).
    return tfds.builder(
        spec.removeprefix(TFDS_PREFIX), data_dir=os.environ.get("TFDS_DATA_DIR") or None
    )


def _tfds_split(builder: Any, split: str) -> tf.data.Dataset:
    """(encoded image, label) of a TFDS split in its stored order."""
    import tensorflow_datasets as tfds

    image_key, label_key = builder.info.supervised_keys
    dataset = builder.as_dataset(
        split=split, shuffle_files=False, decoders={image_key: tfds.decode.SkipDecoding()}
    )
    return dataset.map(plain(lambda example: (example[image_key], example[label_key])))


def _tfds_items(builder: Any, split: str) -> list[Item]:
    """Every example of a TFDS split as an Item keyed ``split/index`` (reads labels only)."""
    labels = _tfds_split(builder, split).map(plain(lambda image, label: label)).batch(4096)
    flat = [int(label) for batch in labels.as_numpy_iterator() for label in batch]
    return [Item(f"{split}/{index}", label) for index, label in enumerate(flat)]
