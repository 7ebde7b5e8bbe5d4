"""The seeds' trainer (the HPT codelab's ``trainer/task.py``), kept as written, for comparisons.

What the codelab does, kept: a TFDS dataset of encoded images, decoded by TFDS and
mapped with `preprocess_data` (`tf.image.resize` to 150 and /255) on every epoch,
shuffled and batched, no cache and no prefetch; the same CNN; `model.compile` with
SGD and `model.fit(train_data, epochs=..., validation_data=...)` under the strategy's
scope, the batch scaled by the replicas in sync.

What differs, each forced by running it side by side with our trainer, offline:

* data: `tfds.ImageFolder` over the same images as encoded files
  (``train/<class>/*``, ``test/<class>/*``) instead of `tfds.load('horses_or_humans')`;
  the codelab validates on TFDS's ``test`` split, here that is our validation split;
* head: `num_classes` softmax units with sparse categorical cross-entropy (the
  multi-worker seed's head) instead of one sigmoid unit: the sample has 10 classes;
* the strategy, image size, batch size and epochs are arguments (codelab:
  `MirroredStrategy()`, 150, 64 per replica, 10 epochs).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
import tensorflow_datasets as tfds

from trainer import records

IMAGE_SIZE = 150
BATCH_SIZE = 64
NUM_EPOCHS = 10
# Our split → the TFDS split the seeds read it as.
TFDS_SPLITS = {"train": "train", "validation": "test"}


def preprocess_data(
    image: tf.Tensor, label: tf.Tensor, image_size: int = IMAGE_SIZE
) -> tuple[tf.Tensor, tf.Tensor]:
    """Resizes and scales images (the codelab's function, size as an argument)."""
    image = tf.image.resize(image, (image_size, image_size))
    return tf.cast(image, tf.float32) / 255.0, label


def create_dataset(
    folder: str, batch_size: int, image_size: int = IMAGE_SIZE
) -> tuple[tf.data.Dataset, tf.data.Dataset, int]:
    """Loads the image folder the way `tfds.load` would, and preprocesses it every epoch.

    Returns:
        Training and validation datasets, and the number of classes.
    """
    builder = tfds.ImageFolder(folder)
    data = builder.as_dataset(as_supervised=True)
    preprocess = functools.partial(preprocess_data, image_size=image_size)

    train_data = data["train"].map(preprocess)
    train_data = train_data.shuffle(1000)
    train_data = train_data.batch(batch_size)

    validation_data = data["test"].map(preprocess)
    validation_data = validation_data.batch(batch_size)

    return train_data, validation_data, builder.info.features["label"].num_classes


def create_model(
    num_units: int,
    learning_rate: float,
    momentum: float,
    num_classes: int,
    image_size: int = IMAGE_SIZE,
) -> keras.Model:
    """Defines and compiles the codelab's model."""
    inputs = keras.Input(shape=(image_size, image_size, 3))
    x = keras.layers.Conv2D(16, (3, 3), activation="relu")(inputs)
    x = keras.layers.MaxPooling2D((2, 2))(x)
    x = keras.layers.Conv2D(32, (3, 3), activation="relu")(x)
    x = keras.layers.MaxPooling2D((2, 2))(x)
    x = keras.layers.Conv2D(64, (3, 3), activation="relu")(x)
    x = keras.layers.MaxPooling2D((2, 2))(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(num_units, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum),
        metrics=["accuracy"],
    )
    return model


class EpochTimer(keras.callbacks.Callback):
    """Per-epoch wall time, and the training part of it (until validation starts)."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[dict[str, float]] = []
        self._start = self._train_end = 0.0

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._start, self._train_end = time.perf_counter(), 0.0

    def on_test_begin(self, logs: Any = None) -> None:
        self._train_end = self._train_end or time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        end = time.perf_counter()
        self.epochs.append(
            {"seconds": end - self._start, "train_seconds": (self._train_end or end) - self._start}
        )


def train(
    folder: str,
    *,
    strategy: tf.distribute.Strategy,
    epochs: int = NUM_EPOCHS,
    batch_size: int = BATCH_SIZE,
    image_size: int = IMAGE_SIZE,
    learning_rate: float = 0.01,
    momentum: float = 0.9,
    num_units: int = 128,
    seed: int = 42,
) -> dict[str, Any]:
    """Run the codelab's `main()` on `folder` under `strategy`.

    Returns:
        ``history``: per epoch ``seconds`` (with validation), ``train_seconds``,
        ``images_per_second`` (training part), ``loss``, ``accuracy``, ``val_loss``,
        ``val_accuracy``; ``jit_compile`` (whether Keras chose XLA), ``replicas``.
    """
    keras.utils.set_random_seed(seed)
    global_batch_size = batch_size * strategy.num_replicas_in_sync
    train_data, validation_data, num_classes = create_dataset(folder, global_batch_size, image_size)
    with strategy.scope():
        model = create_model(num_units, learning_rate, momentum, num_classes, image_size)
    timer = EpochTimer()
    history = model.fit(
        train_data, epochs=epochs, validation_data=validation_data, callbacks=[timer], verbose=0
    )
    train_images = count_images(folder, "train")
    epochs_out = []
    for index, times in enumerate(timer.epochs):
        metrics = {k: float(v[index]) for k, v in history.history.items()}
        epochs_out.append(
            {
                "epoch": index + 1,
                **times,
                "images_per_second": train_images / times["train_seconds"],
                **metrics,
            }
        )
    return {
        "history": epochs_out,
        "jit_compile": bool(model.jit_compile),
        "replicas": strategy.num_replicas_in_sync,
        "train_images": train_images,
    }


def count_images(folder: str, split: str) -> int:
    """Files under ``folder/<split>/<class>/``."""
    return sum(1 for path in Path(folder, split).rglob("*") if path.is_file())


def write_tfds_folder(prepared: str, metadata: dict, images: Path, folder: Path) -> dict[str, int]:
    """Give the seeds the prepared dataset's splits as encoded files, the way TFDS holds them.

    Hard-links each prepared example's source image (``images/<key>``) into
    ``folder/<tfds split>/<key>`` (see `TFDS_SPLITS`), so both trainers see the
    same images in the same splits.

    Returns:
        Images per TFDS split.
    """
    counts = {}
    for split, tfds_split in TFDS_SPLITS.items():
        counts[tfds_split] = 0
        for _, _, key in records.read_examples(prepared, metadata, split):
            target = folder / tfds_split / key
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(images / key, target)
            counts[tfds_split] += 1
    return counts


def main(argv: list[str] | None = None) -> None:
    """The codelab's `main()` as a whole process: flags, MirroredStrategy, fit, hypertune report.

    Prints one ``RESULT {json}`` line (the `train` result) for the benchmarks.
    """
    import argparse
    import json

    import hypertune

    parser = argparse.ArgumentParser(prog="seed_trainer")
    parser.add_argument("--folder", required=True, help="train/<class>/* and test/<class>/*")
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--num_units", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=NUM_EPOCHS)
    parser.add_argument("--batch_size", type=int, default=BATCH_SIZE)
    parser.add_argument("--image_size", type=int, default=IMAGE_SIZE)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    strategy = tf.distribute.MirroredStrategy()
    result = train(
        args.folder,
        strategy=strategy,
        epochs=args.epochs,
        batch_size=args.batch_size,
        image_size=args.image_size,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
        num_units=args.num_units,
        seed=args.seed,
    )
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy",
        metric_value=result["history"][-1]["val_accuracy"],
        global_step=args.epochs,
    )
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
