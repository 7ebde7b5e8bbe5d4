"""Dataset preparation: round trip, determinism, bad files, bad input, TFDS, sample, component."""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import typer
from PIL import Image
from typer.testing import CliRunner, Result

from dataprep import sources, splitting
from dataprep.prepare import PreparationError, prepare_dataset
from dataprep.shards import PLAN_FILE
from pipelines.app import cli
from tests.conftest import python_stdout
from trainer import data, preprocess, records

ROOT = Path(__file__).resolve().parents[1]
SIZE = preprocess.MIN_IMAGE_SIZE
CLASS_SIZES = {"cat": 12, "dog": 10, "fish": 8}
# (extension, PIL format, PIL mode): RGB and greyscale, every accepted format.
FORMATS = [
    ("png", "PNG", "RGB"),
    ("jpg", "JPEG", "RGB"),
    ("png", "PNG", "L"),
    ("gif", "GIF", "P"),
    ("bmp", "BMP", "RGB"),
    ("jpeg", "JPEG", "L"),
]


def encode_image(seed: int, fmt: str, mode: str) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(10 + seed % 7, 14, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, fmt)
    return buffer.getvalue()


def make_folder(root: Path, sizes: dict[str, int] = CLASS_SIZES) -> Path:
    """`<class>/*` images of every format; returns `root`."""
    for class_index, (name, count) in enumerate(sizes.items()):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            ext, fmt, mode = FORMATS[i % len(FORMATS)]
            (root / name / f"{i:02d}.{ext}").write_bytes(
                encode_image(100 * class_index + i, fmt, mode)
            )
    return root


def read_back(out: Path, metadata: dict) -> dict[str, list[tuple[np.ndarray, int, str]]]:
    return {
        split: list(records.read_examples(str(out), metadata, split)) for split in records.SPLITS
    }


def membership(out: Path, metadata: dict) -> dict[str, set[str]]:
    return {split: {key for *_, key in ex} for split, ex in read_back(out, metadata).items()}


def shard_bytes(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*.tfrecord")}


def invoke_prepare(*args: str) -> Result:
    """Run `hpt-pipeline prepare ARGS` in-process."""
    command = typer.main.get_command(cli.app)
    # An app with a single command runs it without its name.
    argv = ["prepare", *args] if isinstance(command, typer.core.TyperGroup) else list(args)
    return CliRunner().invoke(cli.app, argv)


# --- round trip ---------------------------------------------------------------------------


def test_round_trip_gives_the_folders_labels_counts_and_pixels(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    metadata = prepare_dataset(str(source), str(out), image_size=SIZE, seed=0, num_shards=3)

    assert metadata == records.read_metadata(str(out))
    assert metadata["class_names"] == ["cat", "dog", "fish"]
    assert metadata["image_shape"] == [SIZE, SIZE, 3]
    examples = read_back(out, metadata)
    per_class: Counter[str] = Counter()
    for split, split_examples in examples.items():
        labels = [label for _, label, _ in split_examples]
        assert metadata["splits"][split] == {
            **records.split_summary(labels, metadata["class_names"]),
            "source_split": "train",
            "shards": metadata["splits"][split]["shards"],
        }
        for image, label, key in split_examples:
            assert metadata["class_names"][label] == key.split("/")[0]
            original = (source / key).read_bytes()
            expected = preprocess.decode_and_resize(tf.constant(original), (SIZE, SIZE, 3))
            np.testing.assert_array_equal(image, expected.numpy())
            if Image.open(source / key).mode == "L":
                assert (image[..., 0] == image[..., 2]).all()
        per_class.update(metadata["class_names"][label] for label in labels)
    assert per_class == CLASS_SIZES
    keys = [key for ex in examples.values() for *_, key in ex]
    assert sorted(keys) == sorted(str(p.relative_to(source)) for p in source.rglob("*.*"))
    assert {key.rsplit(".", 1)[1] for key in keys} == {"png", "jpg", "jpeg", "gif", "bmp"}
    for split in records.SPLITS:
        shards = metadata["splits"][split]["shards"]
        assert len(shards) == min(3, metadata["splits"][split]["count"])
        for shard in shards:
            assert records.file_digest(str(out / shard["file"])) == {
                "size": shard["size"],
                "sha256": shard["sha256"],
            }
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]  # no staging leftovers
    batch_images, _ = next(iter(data.eval_dataset(str(out), metadata, "train", 4)))
    assert batch_images.shape == (4, SIZE, SIZE, 3) and batch_images.dtype == tf.float32


def test_split_folders_are_kept_and_only_missing_splits_are_carved(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_folder(source / "train")
    make_folder(source / "test", {"cat": 3, "dog": 2, "fish": 2})
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SIZE, validation_fraction=0.2
    )
    members = membership(tmp_path / "out", metadata)
    assert {split: s["source_split"] for split, s in metadata["splits"].items()} == {
        "train": "train",
        "validation": "train",
        "test": "test",
    }
    assert all(key.startswith("test/") for key in members["test"]) and len(members["test"]) == 7
    assert all(key.startswith("train/") for key in members["train"] | members["validation"])
    assert metadata["splits"]["validation"]["per_class"] == {"cat": 2, "dog": 2, "fish": 2}


# --- determinism ----------------------------------------------------------------------------


PREPARE_IN_SUBPROCESS = """
import sys
from dataprep.prepare import prepare_dataset
prepare_dataset(sys.argv[1], sys.argv[2], image_size=22, seed=7, num_shards=2)
"""


def test_same_seed_gives_byte_identical_shards_even_across_processes(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    first = prepare_dataset(str(source), str(tmp_path / "a"), image_size=SIZE, seed=7, num_shards=2)
    subprocess.run(
        [sys.executable, "-c", PREPARE_IN_SUBPROCESS, str(source), str(tmp_path / "b")],
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        check=True,
        capture_output=True,
        timeout=120,
    )
    second = records.read_metadata(str(tmp_path / "b"))
    assert shard_bytes(tmp_path / "a") == shard_bytes(tmp_path / "b")
    assert len(shard_bytes(tmp_path / "a")) == 6
    assert first["splits"] == second["splits"]
    assert membership(tmp_path / "a", first) == membership(tmp_path / "b", second)

    other = prepare_dataset(str(source), str(tmp_path / "c"), image_size=SIZE, seed=8, num_shards=2)
    other_members = membership(tmp_path / "c", other)
    assert other_members["validation"] != membership(tmp_path / "a", first)["validation"]
    assert other["splits"]["validation"]["per_class"] == first["splits"]["validation"]["per_class"]


def test_plan_is_stratified_exact_disjoint_and_seeded() -> None:
    labels = [0] * 50 + [1] * 30 + [2] * 20
    items = [(f"item{i}", label) for i, label in enumerate(labels)]
    carve = {"validation": 0.1, "test": 0.2}
    plans = splitting.plan_splits({"train": items}, carve, seed=1)

    counts = {split: Counter(label for _, label in p.items) for split, p in plans.items()}
    assert counts["validation"] == {0: 5, 1: 3, 2: 2}
    assert counts["test"] == {0: 10, 1: 6, 2: 4}
    keys = [key for p in plans.values() for key, _ in p.items]
    assert sorted(keys) == sorted(key for key, _ in items)  # disjoint, nothing lost
    assert plans == splitting.plan_splits({"train": items}, carve, seed=1)
    assert plans["test"] != splitting.plan_splits({"train": items}, carve, seed=2)["test"]
    assert splitting.allocate([1, 1, 1], 0.4).tolist() == [1, 0, 0]


# --- bad files ------------------------------------------------------------------------------


def add_corrupt_files(source: Path, count: int) -> list[str]:
    payloads = [b"not an image", b"", encode_image(0, "PNG", "RGB")[:60]]
    names = []
    for i in range(count):
        name = f"dog/corrupt{i}.{['jpg', 'png', 'png'][i % 3]}"
        (source / name).write_bytes(payloads[i % 3])
        names.append(name)
    return names


def test_corrupt_files_are_skipped_and_listed_with_their_reason(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    corrupt = add_corrupt_files(source, 3)
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.1
    )

    reasons = {entry["file"]: entry["reason"] for entry in metadata["skipped"]}
    assert sorted(reasons) == sorted(corrupt)
    assert reasons["dog/corrupt0.jpg"].startswith("Unknown image file format")
    assert reasons["dog/corrupt1.png"] == "Input is empty."
    assert "PNG" in reasons["dog/corrupt2.png"]
    assert metadata["source_images"] == sum(CLASS_SIZES.values()) + 3
    assert sum(s["count"] for s in metadata["splits"].values()) == sum(CLASS_SIZES.values())
    assert not set(corrupt) & set().union(*membership(tmp_path / "out", metadata).values())


def test_too_many_corrupt_files_fail_naming_them_and_leave_nothing(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    corrupt = add_corrupt_files(source, 4)  # 4 of 34 > 10%
    with pytest.raises(PreparationError, match=r"4 of 34 images are unreadable") as error:
        prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.1)

    assert "\n" not in str(error.value)
    assert sum(name in str(error.value) for name in corrupt) >= 1
    assert sorted(os.listdir(tmp_path)) == ["src"]


@pytest.mark.parametrize("where", ["local", "ram"])
def test_an_interrupted_run_leaves_no_output_and_its_shards_for_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    source = make_folder(tmp_path / "src")
    out = str(tmp_path / "out") if where == "local" else f"ram://{tmp_path.name}/out"
    write_metadata = records.write_metadata

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(records, "write_metadata", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_dataset(str(source), out, image_size=SIZE)

    assert not tf.io.gfile.exists(out)
    stage = out.rsplit("/", 1)[0] + "/.out.partial"  # kept: every shard was finished
    assert sorted(os.listdir(tmp_path)) == (["src"] if where == "ram" else [".out.partial", "src"])
    monkeypatch.setattr(records, "write_metadata", write_metadata)
    said: list[str] = []
    metadata = prepare_dataset(str(source), out, image_size=SIZE, say=said.append)
    shard_count = sum(len(split["shards"]) for split in metadata["splits"].values())
    assert len(said) == 1 and said[0].startswith(f"kept {shard_count} of {shard_count} shard(s)")
    assert not tf.io.gfile.exists(stage)


def test_object_store_output_is_written_in_place_and_overwritten(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = f"ram://{tmp_path.name}/prepared"
    prepare_dataset(str(source), out, image_size=SIZE, seed=1)
    with pytest.raises(PreparationError, match="exists and is not empty"):
        prepare_dataset(str(source), out, image_size=SIZE, seed=2)
    metadata = prepare_dataset(str(source), out, image_size=SIZE, seed=2, overwrite=True)

    assert records.read_metadata(out)["seed"] == 2
    assert sorted(tf.io.gfile.listdir(out)) == sorted(
        [records.METADATA_FILE, PLAN_FILE]
        + [s["file"] for split in metadata["splits"].values() for s in split["shards"]]
    )


def test_overwrite_replaces_a_local_dataset(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    prepare_dataset(str(source), str(out), image_size=SIZE, overwrite=True)

    assert not (out / "stale.txt").exists() and (out / records.METADATA_FILE).exists()
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]


# --- bad input: one line, non-zero exit, nothing written -------------------------------------


def make_bad_input_folders(tmp: Path) -> None:
    make_folder(tmp / "good")
    (tmp / "empty").mkdir()
    (tmp / "empty_classes" / "cat").mkdir(parents=True)
    (tmp / "empty_classes" / "dog").mkdir()
    make_folder(tmp / "single", {"cat": 4})
    make_folder(tmp / "no_validation_images" / "train")
    (tmp / "no_validation_images" / "validation" / "cat").mkdir(parents=True)
    (tmp / "taken").mkdir()
    (tmp / "taken" / "keep.txt").write_text("mine")


# Case → (arguments, with {tmp} for the test's folder; what the one-line error must say).
BAD_INPUTS = {
    "empty folder": (["--source={tmp}/empty"], "no images found"),
    "class folders without images": (["--source={tmp}/empty_classes"], "no images found"),
    "missing folder": (["--source={tmp}/missing"], "not a directory"),
    "single class": (["--source={tmp}/single"], "only one class (cat)"),
    "split with no images": (
        ["--source={tmp}/no_validation_images"],
        "split folder 'validation' has no images",
    ),
    "unknown tfds name": (["--source=tfds:no_such_dataset_xyz"], "tfds:no_such_dataset_xyz"),
    "image size 0": (["--source={tmp}/good", "--image-size=0"], "--image-size=0: expected"),
    "image size 10": (["--source={tmp}/good", "--image-size=10"], "--image-size=10: expected"),
    "negative fraction": (
        ["--source={tmp}/good", "--validation-fraction=-0.1"],
        "--validation-fraction=-0.1: expected a fraction in [0, 1)",
    ),
    "fraction 1": (["--source={tmp}/good", "--test-fraction=1"], "--test-fraction=1.0: expected"),
    "fractions sum to 1": (
        ["--source={tmp}/good", "--validation-fraction=0.6", "--test-fraction=0.4"],
        "expected a sum < 1",
    ),
    "carved split with fraction 0": (
        ["--source={tmp}/good", "--test-fraction=0"],
        "--test-fraction=0.0: {tmp}/good has no test split",
    ),
    "carved split left empty": (
        ["--source={tmp}/good", "--validation-fraction=0.01"],
        "leave the validation split empty",
    ),
    "non-empty output": (
        ["--source={tmp}/good", "--output={tmp}/taken"],
        "--output={tmp}/taken: exists and is not empty",
    ),
}


@pytest.mark.parametrize(("args", "expected"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_gives_one_line_error_and_writes_nothing(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    make_bad_input_folders(tmp_path)
    before = sorted(os.listdir(tmp_path))
    args = [arg.format(tmp=tmp_path) for arg in args]
    if not any(arg.startswith("--output") for arg in args):
        args.append(f"--output={tmp_path / 'out'}")
    result = invoke_prepare(*args)

    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("hpt-pipeline: error: ")
    assert expected.format(tmp=tmp_path) in result.stderr
    assert "Traceback" not in result.output
    assert sorted(os.listdir(tmp_path)) == before
    assert os.listdir(tmp_path / "taken") == ["keep.txt"]


def test_cli_prepares_and_prints_a_summary_table(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    result = invoke_prepare(
        f"--source={source}", f"--output={tmp_path / 'out'}", f"--image-size={SIZE}", "--seed=3"
    )

    assert result.exit_code == 0, result.output
    metadata = records.read_metadata(str(tmp_path / "out"))
    assert metadata["seed"] == 3
    for name in ("train", "validation", "test", "cat", "dog", "fish", "images", "shards"):
        assert name in result.stdout
    totals = next(line for line in result.stdout.splitlines() if line.startswith("│ images"))
    assert [cell.strip() for cell in totals.split("│")[2:5]] == [
        str(metadata["splits"][split]["count"]) for split in records.SPLITS
    ]


# --- TFDS (mocked: never the network) -------------------------------------------------------


@pytest.fixture
def mocked_horses_or_humans(tmp_path: Path):
    """tfds.testing.mock_data over horses_or_humans with real split names (train, test)."""
    import tensorflow_datasets as tfds

    data_dir = tmp_path / "tfds"
    builder = tfds.builder("horses_or_humans", data_dir=str(data_dir))
    builder.info.set_splits(
        tfds.core.SplitDict(
            [
                tfds.core.SplitInfo(name=name, shard_lengths=[12], num_bytes=0)
                for name in ("train", "test")
            ]
        )
    )
    os.makedirs(builder.data_dir)
    builder.info.write_to_directory(builder.data_dir)
    with tfds.testing.mock_data(
        num_examples=12, policy=tfds.testing.MockPolicy.USE_FILES, data_dir=str(data_dir)
    ):
        yield


def test_tfds_source_carves_a_validation_split_from_train(
    tmp_path: Path, mocked_horses_or_humans: None
) -> None:
    out = tmp_path / "out"
    metadata = prepare_dataset(
        "tfds:horses_or_humans", str(out), image_size=SIZE, validation_fraction=0.25
    )

    assert metadata["class_names"] == ["horses", "humans"]
    assert metadata["source"] == "tfds:horses_or_humans"
    splits = metadata["splits"]
    assert {name: (s["count"], s["source_split"]) for name, s in splits.items()} == {
        "train": (9, "train"),
        "validation": (3, "train"),
        "test": (12, "test"),
    }
    members = membership(out, metadata)
    assert all(key.startswith("train/") for key in members["train"] | members["validation"])
    assert not members["train"] & members["validation"]
    assert len(members["train"] | members["validation"]) == 12
    again = prepare_dataset(
        "tfds:horses_or_humans", str(tmp_path / "again"), image_size=SIZE, validation_fraction=0.25
    )
    assert shard_bytes(out) == shard_bytes(tmp_path / "again")
    assert again["splits"] == splits


# --- the bundled sample ---------------------------------------------------------------------


def test_sample_source_is_offline_digits_with_ten_classes(tmp_path: Path) -> None:
    pattern = os.path.join(tempfile.gettempdir(), "hpt-*")
    before = set(glob.glob(pattern))
    metadata = prepare_dataset("sample", str(tmp_path / "out"), image_size=SIZE, channels=1)

    assert metadata["class_names"] == [str(digit) for digit in range(10)]
    assert metadata["image_shape"] == [SIZE, SIZE, 1]
    assert sum(s["count"] for s in metadata["splits"].values()) == 1797
    assert metadata["source"] == "sample" and metadata["skipped"] == []
    image, label, key = next(records.read_examples(str(tmp_path / "out"), metadata, "test"))
    assert key.startswith(f"{label}/") and image.shape == (SIZE, SIZE, 1) and image.max() > 0
    assert set(glob.glob(pattern)) == before  # nothing written outside the output


def test_the_sample_digits_are_load_digits_read_without_importing_scikit_learn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The preparation step reads scikit-learn's CSV itself: the same arrays, 0.6 s sooner."""
    from sklearn.datasets import load_digits

    expected = load_digits()
    code = (
        "import sys; sys.modules['sklearn'] = None\n"  # any import of scikit-learn fails
        "from dataprep.sources import digits\n"
        "images, labels = digits()\n"
        "print(images.shape, images.dtype, labels.dtype, images.sum(), labels.sum())"
    )
    images, labels = expected.images, expected.target
    shape, dtype, label_dtype, pixel_sum, label_sum = python_stdout(code).replace(", ", ",").split()
    assert shape == "(1797,8,8)" and dtype == str(images.dtype) and label_dtype == str(labels.dtype)
    assert float(pixel_sum) == images.sum() and int(label_sum) == labels.sum()
    read_images, read_labels = sources.digits()
    assert np.array_equal(read_images, images) and np.array_equal(read_labels, labels)
    # Another packaging that does not list the file, or no distribution record: `load_digits`.
    monkeypatch.setattr(sources.importlib.metadata, "files", lambda name: [])
    fallback_images, fallback_labels = sources.digits()
    assert np.array_equal(fallback_images, images) and np.array_equal(fallback_labels, labels)

    def unknown(name: str) -> None:
        raise sources.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(sources.importlib.metadata, "files", unknown)
    assert np.array_equal(sources.digits()[1], labels)


def test_the_in_memory_sample_prepares_as_its_image_folder_would(tmp_path: Path) -> None:
    """The sample is held in memory (no 1,797 files per run); the records match the folder's."""
    sources.write_sample_folder(str(tmp_path / "digits"))
    from_folder = prepare_dataset(str(tmp_path / "digits"), str(tmp_path / "a"), image_size=SIZE)
    from_memory = prepare_dataset("sample", str(tmp_path / "b"), image_size=SIZE)
    assert from_memory["splits"] == from_folder["splits"]
    assert from_memory["class_names"] == from_folder["class_names"]
    assert shard_bytes(tmp_path / "b") == shard_bytes(tmp_path / "a")
    assert len(shard_bytes(tmp_path / "a")) >= 3


# --- the component --------------------------------------------------------------------------


def check_component_metadata(artifact_metadata: dict, out: str) -> None:
    metadata = records.read_metadata(out)
    digest = hashlib.sha256(Path(out, records.METADATA_FILE).read_bytes()).hexdigest()
    assert artifact_metadata["metadata_sha256"] == digest
    assert artifact_metadata["class_names"] == metadata["class_names"]
    assert [int(d) for d in artifact_metadata["image_shape"]] == metadata["image_shape"]
    assert {k: int(v) for k, v in artifact_metadata["counts"].items()} == {
        split: s["count"] for split, s in metadata["splits"].items()
    }
    assert artifact_metadata["source"] == metadata["source"]


def test_component_writes_the_dataset_artifact_with_lineage_metadata(tmp_path: Path) -> None:
    from kfp import dsl

    from components.prepare_dataset import prepare_dataset as component

    source = make_folder(tmp_path / "src")
    artifact = dsl.Dataset(name="dataset", uri=str(tmp_path / "artifact"), metadata={})
    component.python_func(
        source=str(source),
        dataset=artifact,
        image_size=SIZE,
        validation_fraction=0.1,
        test_fraction=0.1,
        seed=5,
        shared_root="",
        max_bad_fraction=0.01,
        record_format="auto",
        prepare_workers=1,
        dataset_dir="",  # a folder of this task's own (the cloud targets')
    )

    check_component_metadata(artifact.metadata, artifact.path)
    assert records.read_metadata(artifact.path)["seed"] == 5


def test_component_runs_under_kfp_local_without_installing_kfp(tmp_path: Path) -> None:
    from kfp import local

    from components.prepare_dataset import prepare_dataset as component

    source = make_folder(tmp_path / "src")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    task = component(
        source=str(source),
        image_size=SIZE,
        validation_fraction=0.1,
        test_fraction=0.1,
        seed=42,
        shared_root="",
        max_bad_fraction=0.01,
        record_format="auto",
        prepare_workers=1,
        dataset_dir="",  # a folder of this task's own (the cloud targets')
    )
    dataset = task.outputs["dataset"]

    check_component_metadata(dataset.metadata, dataset.path)
    assert json.loads(Path(dataset.path, records.METADATA_FILE).read_text())["seed"] == 42


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "PNG", "JPEG", "WEBP"])
def test_every_format_decodes_to_greyscale_and_rgb(fmt):
    import io

    import numpy as np
    from PIL import Image

    from trainer.preprocess import decode_and_resize

    buffer = io.BytesIO()
    Image.fromarray(np.full((30, 40, 3), 120, np.uint8)).save(buffer, format=fmt)
    for channels in (1, 3):
        image = decode_and_resize(buffer.getvalue(), (24, 24, channels)).numpy()
        assert image.shape == (24, 24, channels)
        assert abs(int(image.mean()) - 120) <= 3


def test_webp_is_read_and_other_files_are_counted_and_named_on_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dataprep.prepare import main, skipped_lines

    source = make_folder(tmp_path / "src")
    (source / "cat" / "extra.webp").write_bytes(encode_image(7, "WEBP", "RGB"))
    (source / "cat" / "notes.txt").write_text("not an image")
    (source / "dog" / "scan.tiff").write_bytes(b"II*\0")
    (source / "dog" / ".DS_Store").write_bytes(b"\0")
    out, result = tmp_path / "out", tmp_path / "result.json"
    main(["--source", str(source), "--output", str(out), "--result", str(result)])
    printed = capsys.readouterr().out
    metadata = json.loads(result.read_text())["metadata"]
    assert metadata["source_images"] == sum(CLASS_SIZES.values()) + 1  # the .webp
    assert "cat/extra.webp" in set().union(*membership(out, metadata).values())
    assert metadata["ignored"]["by_extension"] == {".txt": 1, ".tiff": 1, "(none)": 1}
    ignored = next(line for line in printed.splitlines() if line.startswith("ignored 3 file(s)"))
    assert "(none) 1, .tiff 1, .txt 1" in ignored and "cat/notes.txt" in ignored

    corrupt = add_corrupt_files(source, 5)
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out2"), image_size=SIZE, max_bad_fraction=0.2
    )
    (skipped, _) = skipped_lines(metadata)
    assert skipped.startswith("skipped 5 unreadable image(s): dog/corrupt")
    assert skipped.endswith(" and 2 more")
    assert sum(name in skipped for name in corrupt) == 3  # the first few named
