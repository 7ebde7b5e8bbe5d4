"""Seed 001's trainer (the multi-worker codelab's ``trainer/task.py``), kept as written.

What the codelab does, kept: a TFDS dataset of encoded images, decoded by TFDS and
mapped with `preprocess_data` (`tf.image.resize` and /255, ``AUTOTUNE`` parallel
calls) on every epoch, ``shuffle(1000)``, batched, prefetched, with the ``DATA``
auto-shard policy; `ResNet50(include_top=False)` → `GlobalAveragePooling2D` →
`Dense(1016, relu)` → softmax, the whole network trainable, `Adam(1e-4)`,
sparse categorical cross-entropy; `MultiWorkerMirroredStrategy()`, the batch
scaled by the replicas in sync, `model.fit`, then `model.save` (the chief to the
model path, other workers to a ``workertemp_<id>`` folder beside it).

What differs, each forced by running it side by side with our trainer, offline:

* data: `tfds.ImageFolder` over the same images as encoded files
  (``train/<class>/*``, ``test/<class>/*``) instead of `tfds.load('cassava')`;
* weights: ``weights=None`` (nothing here reaches Keras's ImageNet download);
* validation: `model.fit(..., validation_data=...)` on the ``test`` split (the
  codelab validates nothing; the benchmark compares final validation accuracies);
* `model.save` writes ``model.keras`` (Keras 3 saves no SavedModel directory), and
  only when ``--model_dir`` is given;
* the strategy, image size, batch size and epochs are arguments (codelab:
  `MultiWorkerMirroredStrategy()`, 300, 64 per replica, 2 epochs).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import keras
import tensorflow as tf
import tensorflow_datasets as tfds

from benchmarks.seed_trainer import EpochTimer, count_images

PER_REPLICA_BATCH_SIZE = 64
EPOCHS = 2
IMAGE_SIZE = 300
NUM_UNITS = 1016
LEARNING_RATE = 0.0001
STRATEGIES = {
    "multi_worker": tf.distribute.MultiWorkerMirroredStrategy,
    "mirrored": tf.distribute.MirroredStrategy,
    "none": tf.distribute.get_strategy,
}


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
    number_of_classes = builder.info.features["label"].num_classes
    preprocess = functools.partial(preprocess_data, image_size=image_size)

    train_data = data["train"].map(preprocess, num_parallel_calls=tf.data.experimental.AUTOTUNE)
    train_data = train_data.shuffle(1000)
    train_data = train_data.batch(batch_size)
    train_data = train_data.prefetch(tf.data.experimental.AUTOTUNE)

    # Set AutoShardPolicy
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_data = train_data.with_options(options)

    validation_data = data["test"].map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    validation_data = validation_data.batch(batch_size).with_options(options)
    return train_data, validation_data, number_of_classes


def create_model(number_of_classes: int) -> keras.Model:
    """Creates and compiles the ResNet50 model (``weights=None`` here: no download)."""
    base_model = keras.applications.ResNet50(weights=None, include_top=False)
    x = base_model.output
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(NUM_UNITS, activation="relu")(x)
    predictions = keras.layers.Dense(number_of_classes, activation="softmax")(x)
    model = keras.Model(inputs=base_model.input, outputs=predictions)
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.Adam(LEARNING_RATE),
        metrics=["accuracy"],
    )
    return model


def _is_chief(task_type: str | None, task_id: int | None) -> bool:
    """Whether this machine is the chief (the codelab's rule)."""
    return task_type == "chief"


def write_filepath(filepath: str, task_type: str | None, task_id: int | None) -> str:
    """Where this machine saves: the chief at `filepath`, others in a temporary folder."""
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = os.path.join(dirpath, f"workertemp_{task_id}")
        tf.io.gfile.makedirs(dirpath)
    return os.path.join(dirpath, base)


def train(
    folder: str,
    *,
    strategy: tf.distribute.Strategy,
    epochs: int = EPOCHS,
    batch_size: int = PER_REPLICA_BATCH_SIZE,
    image_size: int = IMAGE_SIZE,
    model_dir: str | None = None,
    seed: int = 42,
) -> dict[str, Any]:
    """Run the codelab's `main()` on `folder` under `strategy`.

    Returns:
        ``history`` (per epoch: ``seconds``, ``train_seconds``, ``images_per_second``,
        ``loss``, ``accuracy``, ``val_loss``, ``val_accuracy``), ``replicas``,
        ``train_images`` and ``saved`` (the path written, or None).
    """
    keras.utils.set_random_seed(seed)
    global_batch_size = batch_size * strategy.num_replicas_in_sync
    train_data, validation_data, number_of_classes = create_dataset(
        folder, global_batch_size, image_size
    )
    with strategy.scope():
        model = create_model(number_of_classes)
    timer = EpochTimer()
    history = model.fit(
        train_data, epochs=epochs, validation_data=validation_data, callbacks=[timer], verbose=0
    )
    saved = None
    if model_dir:
        resolver = getattr(strategy, "cluster_resolver", None)
        task = (resolver.task_type, resolver.task_id) if resolver else (None, None)
        saved = write_filepath(os.path.join(model_dir, "model.keras"), *task)
        model.save(saved)
    train_images = count_images(folder, "train")
    return {
        "history": [
            {
                "epoch": index + 1,
                **times,
                "images_per_second": train_images / times["train_seconds"],
                **{k: float(v[index]) for k, v in history.history.items()},
            }
            for index, times in enumerate(timer.epochs)
        ],
        "replicas": strategy.num_replicas_in_sync,
        "train_images": train_images,
        "saved": saved,
    }


def main(argv: list[str] | None = None) -> None:
    """The codelab's `main()` as a whole process; prints one ``RESULT {json}`` line."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="seed001_trainer")
    parser.add_argument("--folder", required=True, help="train/<class>/* and test/<class>/*")
    parser.add_argument("--strategy", choices=STRATEGIES, default="multi_worker")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--batch_size", type=int, default=PER_REPLICA_BATCH_SIZE)
    parser.add_argument("--image_size", type=int, default=IMAGE_SIZE)
    parser.add_argument("--model_dir", default=None, help="where model.save writes (none: skip)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    strategy = STRATEGIES[args.strategy]()
    result = train(
        args.folder,
        strategy=strategy,
        epochs=args.epochs,
        batch_size=args.batch_size,
        image_size=args.image_size,
        model_dir=args.model_dir,
        seed=args.seed,
    )
    print("RESULT " + json.dumps({**result, "strategy": type(strategy).__name__}), flush=True)


if __name__ == "__main__":
    main()
