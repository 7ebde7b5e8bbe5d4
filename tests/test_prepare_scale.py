"""Preparation at scale: a stream with bounded memory, compact records, shard tasks in processes."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from typer.testing import CliRunner

from dataprep.prepare import PreparationError, prepare_dataset
from pipelines.app import cli
from tests import synthetic
from trainer import data, preprocess, records

SMALL = preprocess.MIN_IMAGE_SIZE


def smooth_jpeg(rng: np.random.Generator, size: int) -> bytes:
    """A photo-like JPEG (smooth gradients and a bright square), as cameras give."""
    y, x = np.mgrid[0:size, 0:size] / size
    base = rng.uniform(0, 200, size=3)
    pixels = base + 50 * np.stack([x, y, x * y], axis=-1) + rng.normal(0, 3, (size, size, 3))
    corner = rng.integers(0, size // 2)
    pixels[corner : corner + size // 4, corner : corner + size // 4] = 250
    buffer = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def jpeg_folder(root: Path, per_class: int, size: int, classes: int = 2) -> Path:
    rng = np.random.default_rng(0)
    for label in range(classes):
        (root / f"c{label}").mkdir(parents=True)
        for i in range(per_class):
            (root / f"c{label}" / f"{i:04d}.jpg").write_bytes(smooth_jpeg(rng, size))
    return root


def shard_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.tfrecord"))}


# --- a stream: what is decoded is written before much more is decoded -----------------------


def test_images_are_written_as_they_are_decoded_never_a_whole_split_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe counts images decoded and images written: the gap stays at a few batches."""
    source = jpeg_folder(tmp_path / "src", per_class=200, size=32)
    counts = {"decoded": 0, "written": 0, "most_held": 0}
    lock = threading.Lock()
    decode = preprocess.decode_and_resize

    def counted(encoded: tf.Tensor, image_shape) -> tf.Tensor:
        def count(image: tf.Tensor) -> tf.Tensor:
            with lock:
                counts["decoded"] += 1
            return image

        image = tf.py_function(count, [decode(encoded, image_shape)], tf.uint8)
        image.set_shape([int(d) for d in image_shape])
        return image

    encode = records.encode_example

    def written(*args, **kwargs) -> bytes:
        with lock:
            counts["most_held"] = max(counts["most_held"], counts["decoded"] - counts["written"])
            counts["written"] += 1
        return encode(*args, **kwargs)

    monkeypatch.setattr(preprocess, "decode_and_resize", counted)
    monkeypatch.setattr(records, "encode_example", written)
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SMALL, num_shards=1, record_format="raw"
    )

    train = metadata["splits"]["train"]["count"]
    assert counts["written"] == counts["decoded"] == 400
    assert train == 280
    # Today's holding of a split's decoded images would make the gap the train split (280).
    assert counts["most_held"] <= 160, counts


# --- record_format --------------------------------------------------------------------------


def test_auto_stores_large_images_as_jpeg_the_trainer_decodes_and_small_ones_raw(
    tmp_path: Path,
) -> None:
    source = jpeg_folder(tmp_path / "src", per_class=12, size=128)
    large = prepare_dataset(str(source), str(tmp_path / "large"), image_size=96, num_shards=2)
    small = prepare_dataset(str(source), str(tmp_path / "small"), image_size=32, num_shards=2)
    raw = prepare_dataset(
        str(source), str(tmp_path / "raw"), image_size=96, num_shards=2, record_format="raw"
    )

    assert (large["record_format"], small["record_format"]) == ("encoded", "raw")
    assert raw["record_format"] == "raw"
    large_bytes = sum(len(b) for b in shard_bytes(tmp_path / "large").values())
    raw_bytes = sum(len(b) for b in shard_bytes(tmp_path / "raw").values())
    assert large_bytes * 4 < raw_bytes  # JPEG at quality 90 vs 96×96×3 raw pixels
    # The trainer's reader decodes them: the same images within JPEG's error, same labels.
    for split in records.SPLITS:
        encoded = list(data.read_split(str(tmp_path / "large"), large, split).as_numpy_iterator())
        exact = list(data.read_split(str(tmp_path / "raw"), raw, split).as_numpy_iterator())
        assert [label for _, label in encoded] == [label for _, label in exact]
        for (image, _), (pixels, _) in zip(encoded, exact, strict=True):
            assert image.shape == pixels.shape == (96, 96, 3) and image.dtype == np.uint8
            assert np.abs(image.astype(int) - pixels.astype(int)).mean() < 3


def test_encoded_records_train_evaluate_batches_like_raw_ones(tmp_path: Path) -> None:
    source = jpeg_folder(tmp_path / "src", per_class=20, size=100)
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=96, record_format="encoded"
    )
    fn = data.train_input_fn(str(tmp_path / "out"), metadata, 4, seed=0)
    images, labels = next(iter(fn(tf.distribute.InputContext())))
    assert images.shape == (4, 96, 96, 3) and images.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1.0
    batch, _ = next(iter(data.eval_dataset(str(tmp_path / "out"), metadata, "test", 2)))
    assert batch.shape == (2, 96, 96, 3)


def test_a_dataset_prepared_before_record_format_still_reads_as_raw(tmp_path: Path) -> None:
    out = synthetic.write_dataset(str(tmp_path / "old"), size=32)
    metadata = records.read_metadata(out)
    assert "record_format" not in metadata
    images, _ = next(iter(data.eval_dataset(out, metadata, "train", 8)))
    expected, _ = synthetic.make_images(8, 32, seed=0)
    np.testing.assert_allclose(images.numpy(), expected / 255.0, atol=1e-6)


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (["--record-format", "webp"], "--record-format=webp: expected one of auto, raw, encoded"),
        (["--prepare-workers", "0"], "--prepare-workers=0: expected an integer >= 1"),
    ],
)
def test_prepare_refuses_a_bad_record_format_or_worker_count_in_one_line(
    tmp_path: Path, flag: list[str], expected: str
) -> None:
    source = jpeg_folder(tmp_path / "src", per_class=3, size=32)
    result = CliRunner().invoke(
        cli.app, ["prepare", "--source", str(source), "--output", str(tmp_path / "o"), *flag]
    )
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1].endswith(expected), result.output
    assert not (tmp_path / "o").exists()


# --- shard tasks: planned once, the same bytes in one process or several --------------------


@pytest.mark.slow
def test_two_worker_processes_write_the_same_shards_and_plan_as_one(tmp_path: Path) -> None:
    source = jpeg_folder(tmp_path / "src", per_class=30, size=100)
    (source / "c1" / "bad.jpg").write_bytes(b"not a jpeg")
    one = prepare_dataset(
        str(source), str(tmp_path / "one"), image_size=96, num_shards=3, max_bad_fraction=0.1
    )
    two = prepare_dataset(
        str(source),
        str(tmp_path / "two"),
        image_size=96,
        num_shards=3,
        max_bad_fraction=0.1,
        prepare_workers=2,
    )

    assert shard_bytes(tmp_path / "one") == shard_bytes(tmp_path / "two")
    assert len(shard_bytes(tmp_path / "one")) == 9
    del one["prepared_at"], two["prepared_at"]
    assert one == two
    assert [s["file"] for s in one["skipped"]] == ["c1/bad.jpg"]
    plan = json.loads((tmp_path / "two" / "plan.json").read_text())
    assert plan["record_format"] == "encoded"
    assert [t["file"] for t in plan["tasks"]] == [
        s["file"] for split in records.SPLITS for s in one["splits"][split]["shards"]
    ]
    planned = sorted(key for t in plan["tasks"] for key, _ in t["items"])
    assert len(planned) == 61 and "c1/bad.jpg" in planned


def test_bad_workers_or_format_is_refused_before_the_source_is_read(tmp_path: Path) -> None:
    with pytest.raises(PreparationError, match=r"^--record-format=png: expected one of"):
        prepare_dataset(str(tmp_path / "missing"), str(tmp_path / "o"), record_format="png")
    with pytest.raises(PreparationError, match=r"^--prepare-workers=1.5: expected an integer"):
        prepare_dataset(str(tmp_path / "missing"), str(tmp_path / "o"), prepare_workers=1.5)  # type: ignore[arg-type]


def test_the_feature_cache_reads_encoded_records_as_it_reads_raw_ones(tmp_path: Path) -> None:
    """`trainer.features` feeds its frozen part the same images from either format."""
    import argparse

    from trainer import feature_store, features

    source = jpeg_folder(tmp_path / "src", per_class=10, size=100)
    found = {}
    for stored in ("raw", "encoded"):
        out = tmp_path / stored
        metadata = prepare_dataset(str(source), str(out), image_size=96, record_format=stored)
        stage = tmp_path / f"features-{stored}"
        stage.mkdir()
        args = argparse.Namespace(data=str(out), batch_size=4)

        def run(images: tf.Tensor) -> list[tf.Tensor]:
            return [tf.reduce_mean(images, axis=[1, 2])]  # a "frozen part": mean colour

        split = features._write_split(args, metadata, "train", run, {0: str(stage)})
        assert split["count"] == metadata["splits"]["train"]["count"]
        decode = feature_store.decode_fn([3])
        files = sorted(stage.glob("*.tfrecord"))
        found[stored] = [
            (value.numpy(), int(label))
            for value, label in tf.data.TFRecordDataset([str(f) for f in files]).map(decode)
        ]
    assert [label for _, label in found["raw"]] == [label for _, label in found["encoded"]]
    for (raw, _), (encoded, _) in zip(found["raw"], found["encoded"], strict=True):
        np.testing.assert_allclose(encoded, raw, atol=0.02)


@pytest.mark.slow
def test_too_many_bad_images_with_two_workers_fail_in_one_line_and_leave_nothing(
    tmp_path: Path,
) -> None:
    source = jpeg_folder(tmp_path / "src", per_class=12, size=32)
    for i in range(6):
        (source / "c0" / f"bad{i}.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(PreparationError) as refused:
        prepare_dataset(str(source), str(tmp_path / "out"), image_size=SMALL, prepare_workers=2)
    message = str(refused.value)
    assert "images are unreadable or corrupt, more than --max-bad-fraction=0.01" in message
    assert "\n" not in message and "c0/bad" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
