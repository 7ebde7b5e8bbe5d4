"""Dataset preparation as a user meets it, for what mutmut showed untested in `dataprep/`.

`hpt-pipeline prepare` and `python -m dataprep.prepare` on tiny folders (a few small images):
the refusals of bad folders and options (one line, nothing written), what the metadata and
the printed lines say of left-out files, the progress lines, the result file, the split
sizes carved, and the shards' count. Each runs in a second or two.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import os
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from dataprep import prepare, shards, sources, splitting
from dataprep.prepare import PreparationError, main, prepare_dataset, skipped_lines
from tests.test_prepare import SIZE, encode_image, invoke_prepare, make_folder, membership
from trainer import records

# --- refusals of a bad folder or option: one line, exit 2, nothing written ------------------


def make_bad_folders(tmp: Path) -> None:
    make_folder(tmp / "good", {"cat": 3, "dog": 3})
    make_folder(tmp / "beside" / "train", {"cat": 2, "dog": 2})
    make_folder(tmp / "beside", {"cat": 2})  # a class folder beside the split folders
    make_folder(tmp / "no_train" / "validation", {"cat": 2, "dog": 2})
    make_folder(tmp / "no_train" / "test", {"cat": 2, "dog": 2})
    make_folder(tmp / "empty_class", {"cat": 2, "dog": 2})
    (tmp / "empty_class" / "fish").mkdir()
    (tmp / "a_file").write_text("not a folder")
    (tmp / "no_images" / "cat").mkdir(parents=True)
    (tmp / "no_images" / "dog").mkdir()


# Case → (arguments, with {tmp} for the test's folder; the whole one-line error, without
# the "hpt-pipeline: error: " prefix).
REFUSALS = {
    "split folders beside class folders": (
        ["--source={tmp}/beside"],
        "--source={tmp}/beside: top-level folders cat, train; expected "
        f"{sources.LAYOUTS} (split folders need a train folder and no class folders beside them)",
    ),
    "split folders without train": (
        ["--source={tmp}/no_train"],
        "--source={tmp}/no_train: top-level folders test, validation; expected "
        f"{sources.LAYOUTS} (split folders need a train folder and no class folders beside them)",
    ),
    "class folders without images": (
        ["--source={tmp}/no_images"],
        f"--source={{tmp}}/no_images: no images found; expected {sources.LAYOUTS} with "
        ".jpg/.jpeg/.png/.gif/.bmp/.webp files",
    ),
    "a class folder without images": (
        ["--source={tmp}/empty_class"],
        "--source={tmp}/empty_class: class folder 'fish' has no images",
    ),
    "a source that is a file": (
        ["--source={tmp}/a_file"],
        f"--source={{tmp}}/a_file: not a directory; expected an image folder ({sources.LAYOUTS}), "
        "'sample' or 'tfds:<name>'",
    ),
    "output inside the source": (
        ["--source={tmp}/good", "--output={tmp}/good/prepared"],
        "--output={tmp}/good/prepared: inside the source folder {tmp}/good; expected a "
        "directory outside it",
    ),
    "output is a file": (
        ["--source={tmp}/good", "--output={tmp}/a_file"],
        "--output={tmp}/a_file: exists and is not a directory",
    ),
    "negative seed": (["--source={tmp}/good", "--seed=-1"], "--seed=-1: expected an integer >= 0"),
    "two channels": (
        ["--source={tmp}/good", "--channels=2"],
        "--channels=2: expected 1 (greyscale) or 3 (RGB)",
    ),
    "max bad fraction 1": (
        ["--source={tmp}/good", "--max-bad-fraction=1"],
        "--max-bad-fraction=1.0: expected a fraction in [0, 1)",
    ),
    "negative max bad fraction": (
        ["--source={tmp}/good", "--max-bad-fraction=-0.1"],
        "--max-bad-fraction=-0.1: expected a fraction in [0, 1)",
    ),
    "validation fraction 1": (
        ["--source={tmp}/good", "--validation-fraction=1"],
        "--validation-fraction=1.0: expected a fraction in [0, 1)",
    ),
    "negative test fraction": (
        ["--source={tmp}/good", "--test-fraction=-0.2"],
        "--test-fraction=-0.2: expected a fraction in [0, 1)",
    ),
    "image size one below the minimum": (
        ["--source={tmp}/good", f"--image-size={SIZE - 1}"],
        f"--image-size={SIZE - 1}: expected an integer >= {SIZE} (the CNN needs at least "
        f"{SIZE} pixels per side)",
    ),
    "fractions summing past 1": (
        ["--source={tmp}/good", "--validation-fraction=0.7", "--test-fraction=0.5"],
        "--validation-fraction=0.7 + --test-fraction=0.5 = 1.2: expected a sum < 1 (train keeps "
        "the rest)",
    ),
    "carved validation with fraction 0": (
        ["--source={tmp}/good", "--validation-fraction=0"],
        "--validation-fraction=0.0: {tmp}/good has no validation split, so one is carved out "
        "of train; expected a fraction > 0",
    ),
    "carved splits left empty": (
        ["--source={tmp}/good", "--validation-fraction=0.01", "--test-fraction=0.02"],
        "--validation-fraction=0.01 and --test-fraction=0.02 leave the validation split empty "
        "(6 images in train); expected other fractions or more images",
    ),
    "an unknown scheme's folder": (
        ["--source=ram://{tmp_name}/missing"],
        "--source=ram://{tmp_name}/missing: no such folder, or not readable with this machine's "
        "Google Cloud credentials (gcloud auth application-default login; GOOGLE_APPLICATION_"
        "CREDENTIALS for a service account key)",
    ),
}


@pytest.mark.parametrize(("args", "expected"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_bad_folder_or_option_is_refused_in_one_whole_line_and_nothing_is_written(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    make_bad_folders(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    args = [arg.format(tmp=tmp_path, tmp_name=tmp_path.name) for arg in args]
    if not any(arg.startswith("--output") for arg in args):
        args.append(f"--output={tmp_path / 'out'}")
    result = invoke_prepare(*args)

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"hpt-pipeline: error: {expected.format(tmp=tmp_path, tmp_name=tmp_path.name)}\n"
    )
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


# Python-only options (the component and benchmarks pass them) → the one-line error.
API_REFUSALS = {
    "no shards": ({"num_shards": 0}, "--num-shards=0: expected an integer >= 1"),
    "shards as a float": ({"num_shards": 2.0}, "--num-shards=2.0: expected an integer >= 1"),
    "image size as a bool": ({"image_size": True}, "--image-size=True: expected an integer >= 22"),
    "image size as a float": ({"image_size": 32.0}, "--image-size=32.0: expected an integer"),
    "seed as a bool": ({"seed": False}, "--seed=False: expected an integer >= 0"),
    "an empty output": ({"output": ""}, "--output is empty: expected a directory path"),
}


@pytest.mark.parametrize(("options", "expected"), API_REFUSALS.values(), ids=API_REFUSALS.keys())
def test_a_bad_option_of_the_python_interface_is_refused_naming_it(
    tmp_path: Path, options: dict, expected: str
) -> None:
    source = make_folder(tmp_path / "src", {"cat": 3, "dog": 3})
    output = options.pop("output", str(tmp_path / "out"))
    with pytest.raises(PreparationError) as error:
        prepare_dataset(str(source), output, **{"image_size": SIZE, **options})
    assert str(error.value).startswith(expected)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_the_options_at_their_edges_are_accepted(tmp_path: Path) -> None:
    """The smallest image size, seed 0, one shard, greyscale, no bad image allowed."""
    source = make_folder(tmp_path / "src", {"cat": 4, "dog": 4})
    metadata = prepare_dataset(
        str(source),
        str(tmp_path / "out"),
        image_size=SIZE,
        seed=0,
        num_shards=1,
        channels=1,
        max_bad_fraction=0,
        validation_fraction=0.25,
        test_fraction=0.25,
    )
    assert metadata["image_shape"] == [SIZE, SIZE, 1]
    assert {s: v["count"] for s, v in metadata["splits"].items()} == {
        "train": 4,
        "validation": 2,
        "test": 2,
    }
    assert [len(v["shards"]) for v in metadata["splits"].values()] == [1, 1, 1]
    image, _, _ = next(records.read_examples(str(tmp_path / "out"), metadata, "train"))
    assert image.shape == (SIZE, SIZE, 1)


def test_a_source_with_its_own_validation_split_takes_a_validation_fraction_of_0(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_folder(source / "train", {"cat": 4, "dog": 4})
    make_folder(source / "validation", {"cat": 1, "dog": 2})
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SIZE, validation_fraction=0
    )
    assert metadata["splits"]["validation"]["per_class"] == {"cat": 1, "dog": 2}
    assert metadata["splits"]["validation"]["source_split"] == "validation"


# --- what the folder listing reads, and what it says it left out ----------------------------


def test_hidden_upper_case_and_nested_files_are_read_or_said_never_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = make_folder(tmp_path / "src", {"cat": 3, "dog": 3})
    (source / "cat" / "BIG.PNG").write_bytes(encode_image(1, "PNG", "RGB"))  # read
    (source / "cat" / ".hidden.png").write_bytes(encode_image(2, "PNG", "RGB"))  # said
    (source / ".git" / "objects").mkdir(parents=True)  # no class
    (source / ".git" / "objects" / "x.png").write_bytes(encode_image(3, "PNG", "RGB"))
    for sub, count in (("dog/old", 2), ("dog/older", 1), ("cat/more", 1), ("cat/z", 1)):
        (source / sub).mkdir()
        for i in range(count):
            (source / sub / f"{i}.jpg").write_bytes(encode_image(i, "JPEG", "RGB"))
    (source / "dog" / "old" / "notes.txt").write_text("not counted")
    (source / "dog" / "old" / "deeper").mkdir()
    (source / "dog" / "old" / "deeper" / "9.PNG").write_bytes(encode_image(9, "PNG", "RGB"))
    out, result = tmp_path / "out", tmp_path / "result.json"

    main(["--source", f"{source}/", "--output", str(out), "--result", str(result)])
    metadata = json.loads(result.read_text())["metadata"]
    printed = capsys.readouterr().out.splitlines()

    assert metadata["class_names"] == ["cat", "dog"]
    assert metadata["source"] == str(source)  # the trailing slash stripped
    assert metadata["source_description"] == f"image folder {source}"
    keys = set().union(*membership(out, metadata).values())
    assert "cat/BIG.PNG" in keys and len(keys) == 7
    # Progress comes a batch at a time: here each split is one batch, a line after each.
    assert [line for line in printed if line.startswith("prepared ")] == [
        f"prepared {n}/7 images" for n in split_ends(metadata)
    ]
    assert metadata["ignored"] == {
        "count": 1,
        "by_extension": {".png": 1},
        "first": ["cat/.hidden.png"],
    }
    assert metadata["nested"] == {"cat/more": 1, "cat/z": 1, "dog/old": 3, "dog/older": 1}
    assert (
        "not read: 6 image(s) in 4 folder(s) nested in class folders (a class folder holds its "
        "images directly): cat/more (1), cat/z (1), dog/old (3) …"
    ) in printed
    assert (
        "ignored 1 file(s) that are not images (.png 1; read: "
        ".jpg/.jpeg/.png/.gif/.bmp/.webp): cat/.hidden.png"
    ) in printed


def test_more_ignored_files_than_named_end_their_line_with_an_ellipsis() -> None:
    metadata = {"ignored": prepare.ignored_summary(["a/1.txt", "a/2.txt", "b/3", "b/4.TXT"])}
    assert metadata["ignored"] == {
        "count": 4,
        "by_extension": {".txt": 3, "(none)": 1},
        "first": ["a/1.txt", "a/2.txt", "b/3"],
    }
    assert skipped_lines(metadata) == [
        "ignored 4 file(s) that are not images ((none) 1, .txt 3; read: "
        ".jpg/.jpeg/.png/.gif/.bmp/.webp): a/1.txt, a/2.txt, b/3 …"
    ]
    skipped = [{"file": f"d/{i}.png", "reason": f"r{i}"} for i in range(5)]
    assert skipped_lines({"skipped": skipped}) == [
        "skipped 5 unreadable image(s): d/0.png (r0), d/1.png (r1), d/2.png (r2) and 2 more"
    ]
    assert skipped_lines({"skipped": skipped[:3]}) == [
        "skipped 3 unreadable image(s): d/0.png (r0), d/1.png (r1), d/2.png (r2)"
    ]
    three = {"a/x": 2, "a/y": 1, "b/z": 4}  # as many as are named: no ellipsis
    assert skipped_lines({"nested": three}) == [
        "not read: 7 image(s) in 3 folder(s) nested in class folders (a class folder holds "
        "its images directly): a/x (2), a/y (1), b/z (4)"
    ]
    assert skipped_lines({"ignored": prepare.ignored_summary(["a/1.txt", "a/2", "b/3.TXT"])}) == [
        "ignored 3 file(s) that are not images ((none) 1, .txt 2; read: "
        ".jpg/.jpeg/.png/.gif/.bmp/.webp): a/1.txt, a/2, b/3.TXT"
    ]


def test_a_class_too_small_for_every_split_is_kept_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = make_folder(tmp_path / "src", {"cat": 10, "dog": 10, "fish": 1})
    out, result = tmp_path / "out", tmp_path / "result.json"
    main(["--source", str(source), "--output", str(out), "--result", str(result), "--seed", "4"])
    metadata = json.loads(result.read_text())["metadata"]
    printed = capsys.readouterr().out.splitlines()

    assert metadata["thin_classes"] == {"fish": ["validation", "test"]}
    assert metadata["splits"]["train"]["per_class"]["fish"] == 1
    assert (
        "warning: class 'fish' has no validation and no test image (too few images to be in "
        "every split); its validation/test metrics leave it out"
    ) in printed


# --- python -m dataprep.prepare: its flags, progress lines and result file ------------------


def test_the_module_honours_each_flag_and_writes_the_metadata_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = make_folder(tmp_path / "src", {"cat": 10, "dog": 10})
    out, result = tmp_path / "out", tmp_path / "result.json"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    argv = ["--source", str(source), "--output", str(out), "--result", str(result)]
    # each flag away from its default (150, 0.2, 0.1, 42, 0.01)
    flags = ["--image_size", "24", "--validation_fraction", "0.3", "--test_fraction", "0.2"]
    assert main([*argv, *flags, "--seed", "9", "--max_bad_fraction", "0.5", "--overwrite"]) == 0
    written = json.loads(result.read_text())
    metadata = written["metadata"]
    printed = capsys.readouterr().out.splitlines()

    digest = hashlib.sha256((out / records.METADATA_FILE).read_bytes()).hexdigest()
    assert written["metadata_sha256"] == digest
    assert metadata == records.read_metadata(str(out))
    assert metadata["image_shape"] == [24, 24, 3] and metadata["seed"] == 9
    assert (metadata["validation_fraction"], metadata["test_fraction"]) == (0.3, 0.2)
    assert {s: v["count"] for s, v in metadata["splits"].items()} == {
        "train": 10,
        "validation": 6,
        "test": 4,
    }
    prepared_at = datetime.datetime.fromisoformat(metadata["prepared_at"])
    assert prepared_at.utcoffset() == datetime.timedelta(0) and prepared_at.microsecond == 0
    assert metadata["format_version"] == records.FORMAT_VERSION
    assert not (out / "stale.txt").exists()
    assert (
        printed
        == [f"prepared {n}/20 images" for n in split_ends(metadata)]
        == [
            "prepared 10/20 images",
            "prepared 16/20 images",
            "prepared 20/20 images",
        ]
    )

    corrupt = add_corrupt(source, 4)  # 4 of 24: under --max_bad_fraction 0.5, over its default
    argv = ["--source", str(source), "--output", str(tmp_path / "again"), "--result", str(result)]
    main([*argv, "--max_bad_fraction", "0.5"])
    skipped = json.loads(result.read_text())["metadata"]["skipped"]
    assert sorted(s["file"] for s in skipped) == sorted(corrupt)
    argv[3] = str(tmp_path / "x")
    with pytest.raises(PreparationError, match="more than --max-bad-fraction=0.01 allows"):
        main(argv)


def add_corrupt(source: Path, count: int) -> list[str]:
    names = [f"dog/bad{i}.png" for i in range(count)]
    for name in names:
        (source / name).write_bytes(b"not an image")
    return names


def test_a_share_of_bad_images_exactly_at_the_cap_is_skipped_one_more_fails_naming_three(
    tmp_path: Path,
) -> None:
    source = make_folder(tmp_path / "src", {"cat": 10, "dog": 10})
    corrupt = add_corrupt(source, 5)  # 5 of 25 = 0.2
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.2
    )
    assert sorted(s["file"] for s in metadata["skipped"]) == sorted(corrupt)
    assert all(s["reason"].startswith("Unknown image file format") for s in metadata["skipped"])
    assert metadata["source_images"] == 25
    assert sum(s["count"] for s in metadata["splits"].values()) == 20

    with pytest.raises(PreparationError) as error:
        prepare_dataset(str(source), str(tmp_path / "x"), image_size=SIZE, max_bad_fraction=0.19)
    message = str(error.value)
    assert message.startswith(
        f"--source={source}: 5 of 25 images are unreadable or corrupt, more than "
        "--max-bad-fraction=0.19 allows; first: dog/bad"
    )
    assert message.count("(Unknown image file format") == 3 and "\n" not in message
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]


def test_a_split_larger_than_its_shards_target_gets_more_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TARGET_SHARD_BYTES (256 MiB) made small: a split of n images of b bytes gets ceil(n·b/T)."""
    source = make_folder(tmp_path / "src", {"cat": 10, "dog": 10})
    image_bytes = SIZE * SIZE * 3
    monkeypatch.setattr(shards, "TARGET_SHARD_BYTES", 3 * image_bytes)
    metadata = prepare_dataset(
        str(source),
        str(tmp_path / "out"),
        image_size=SIZE,
        num_shards=2,
        validation_fraction=0.1,
        test_fraction=0.25,
    )
    counts = {s: (v["count"], len(v["shards"])) for s, v in metadata["splits"].items()}
    assert counts == {"train": (13, 5), "validation": (2, 2), "test": (5, 2)}
    assert sum(s["count"] for s in metadata["splits"]["train"]["shards"]) == 13


def split_ends(metadata: dict) -> list[int]:
    """Images prepared when each split's last batch is written (splits in order)."""
    counts = [metadata["splits"][split]["count"] for split in records.SPLITS]
    return [sum(counts[: i + 1]) for i in range(len(counts))]


def test_progress_is_reported_every_tenth_and_at_the_end() -> None:
    lines: list[str] = []
    report = prepare.report_lines(lines.append)
    for done in range(1, 26):
        report(done, 25)
    assert lines == [f"prepared {n}/25 images" for n in [*range(2, 25, 2), 25]]
    few: list[str] = []
    tiny = prepare.report_lines(few.append, every=0.5)
    for done in range(1, 4):
        tiny(done, 3)
    assert few == ["prepared 1/3 images", "prepared 2/3 images", "prepared 3/3 images"]
    # A batch at a time (64 images of 1,797): a line as each tenth is crossed, not only on it.
    batches: list[str] = []
    by_batch = prepare.report_lines(batches.append)
    for done in [*range(64, 1797, 64), 1797]:
        by_batch(done, 1797)
    assert len(batches) == 11 and batches[0] == "prepared 192/1797 images"  # ten + the end
    assert batches[-1] == "prepared 1797/1797 images"


# --- the sample and the splits --------------------------------------------------------------


def test_the_sample_folder_holds_load_digits_scaled_to_0_255(tmp_path: Path) -> None:
    sources.write_sample_folder(str(tmp_path / "digits"))
    images, labels = sources.digits()
    files = sorted(p.relative_to(tmp_path / "digits").as_posix() for p in tmp_path.rglob("*.png"))
    assert len(files) == 1797 and files[0] == "0/0000.png"
    for index in (0, 1, 1796):
        name = f"{labels[index]}/{index:04d}.png"
        pixels = np.asarray(Image.open(tmp_path / "digits" / name))
        assert pixels.dtype == np.uint8
        np.testing.assert_array_equal(pixels, np.round(images[index] * 255 / 16).astype(np.uint8))


def test_carved_splits_take_their_share_of_each_class_and_the_seed_decides_which(
    tmp_path: Path,
) -> None:
    items = [(f"c{label}/{i}", label) for label, n in enumerate((9, 7, 4)) for i in range(n)]
    plans = splitting.plan_splits({"train": items}, {"validation": 0.25, "test": 0.25}, seed=3)
    sizes = {s: Counter(label for _, label in p.items) for s, p in plans.items()}
    assert sizes == {
        "train": {0: 5, 1: 3, 2: 2},
        "validation": {0: 2, 1: 2, 2: 1},
        "test": {0: 2, 1: 2, 2: 1},
    }
    assert all(p.origin == "train" for p in plans.values())
    assert sorted(k for p in plans.values() for k, _ in p.items) == sorted(k for k, _ in items)
    again = splitting.plan_splits({"train": items}, {"validation": 0.25, "test": 0.25}, seed=3)
    assert again == plans
    other = splitting.plan_splits({"train": items}, {"validation": 0.25, "test": 0.25}, seed=4)
    assert [p.items for p in other.values()] != [p.items for p in plans.values()]


# --- a TFDS-like source (a stand-in builder: never the network) ---------------------------


def solid_png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((6, 6, 3), value, np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


class FakeBuilder:
    """What `tfds_source` reads of a builder: its info, its splits, its examples in order."""

    def __init__(self, splits: dict[str, list[int]], supervised=("image", "label")) -> None:
        import tensorflow_datasets as tfds

        self.examples = splits  # split → labels; image i of a split is solid grey 10·i
        self.prepared = False
        features = {
            "image": tfds.features.Image(),
            "label": tfds.features.ClassLabel(names=["a", "b"]),
            "text": tfds.features.Text(),
        }
        self.info = types.SimpleNamespace(
            supervised_keys=supervised,
            features=features,
            splits={name: None for name in splits},
            full_name="fake/1.0.0",
        )

    def download_and_prepare(self) -> None:
        self.prepared = True

    def as_dataset(self, *, split: str, shuffle_files: bool, decoders: dict) -> tf.data.Dataset:
        assert not shuffle_files and set(decoders) == {"image"}
        labels = self.examples[split]
        images = [solid_png(10 * i) for i in range(len(labels))]
        return tf.data.Dataset.from_tensor_slices(
            {"image": tf.constant(images, tf.string), "label": tf.constant(labels, tf.int64)}
        )


@pytest.fixture
def fake_tfds(monkeypatch: pytest.MonkeyPatch) -> dict:
    """`tfds.builder` answers with the builder put in the returned dict (or raises its error)."""
    import tensorflow_datasets as tfds

    given: dict = {}

    def builder(name: str, data_dir: str | None = None) -> FakeBuilder:
        given["call"] = (name, data_dir)
        if isinstance(given.get("builder"), Exception):
            raise given["builder"]
        return given["builder"]

    monkeypatch.setattr(tfds, "builder", builder)
    return given


def test_a_tfds_source_keeps_each_examples_image_with_its_key_and_label(
    tmp_path: Path, fake_tfds: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    fake_tfds["builder"] = FakeBuilder({"train": [0, 1] * 8, "test": [1, 0, 1, 0]})
    out = tmp_path / "out"
    metadata = prepare_dataset("tfds:fake", str(out), image_size=SIZE, validation_fraction=0.25)

    assert fake_tfds["call"] == ("fake", str(tmp_path / "tfds"))
    assert fake_tfds["builder"].prepared
    assert metadata["class_names"] == ["a", "b"]
    assert metadata["source_description"] == "TFDS fake/1.0.0"
    assert {s: (v["count"], v["source_split"]) for s, v in metadata["splits"].items()} == {
        "train": (12, "train"),
        "validation": (4, "train"),
        "test": (4, "test"),
    }
    seen = set()
    for split in records.SPLITS:
        for image, label, key in records.read_examples(str(out), metadata, split):
            origin, index = key.rsplit("/", 1)
            assert origin == metadata["splits"][split]["source_split"]
            labels = fake_tfds["builder"].examples[origin]
            assert label == labels[int(index)] and abs(int(image.mean()) - 10 * int(index)) <= 1
            seen.add(key)
    assert len(seen) == 20

    monkeypatch.setenv("TFDS_DATA_DIR", "")
    prepare_dataset("tfds:fake", str(tmp_path / "again"), image_size=SIZE, validation_fraction=0.25)
    assert fake_tfds["call"] == ("fake", None)


TFDS_REFUSALS = {
    "unknown name": (
        ValueError("Dataset fake not found.\nAvailable: ..."),
        "--source=tfds:fake: unknown TFDS dataset (Dataset fake not found.); expected a name "
        "from tfds.list_builders(), e.g. tfds:horses_or_humans",
    ),
    "a name TFDS asserts on": (
        AssertionError("  bad name  "),
        "--source=tfds:fake: unknown TFDS dataset (bad name); expected a name from "
        "tfds.list_builders(), e.g. tfds:horses_or_humans",
    ),
    "a long first line, cut at 200 characters": (
        ValueError("x" * 300),
        f"--source=tfds:fake: unknown TFDS dataset ({'x' * 200}); expected a name from "
        "tfds.list_builders(), e.g. tfds:horses_or_humans",
    ),
    "no supervised keys": (
        FakeBuilder({"train": [0, 1]}, supervised=None),
        "--source=tfds:fake: not an image classification dataset; expected supervised keys "
        "(Image, ClassLabel)",
    ),
    "a text dataset": (
        FakeBuilder({"train": [0, 1]}, supervised=("text", "label")),
        "--source=tfds:fake: not an image classification dataset; expected supervised keys "
        "(Image, ClassLabel)",
    ),
    "labels that are images": (
        FakeBuilder({"train": [0, 1]}, supervised=("image", "image")),
        "--source=tfds:fake: not an image classification dataset; expected supervised keys "
        "(Image, ClassLabel)",
    ),
    "no train split": (
        FakeBuilder({"test": [0, 1], "validation": [1, 0]}),
        "--source=tfds:fake: splits test, validation; expected a train split",
    ),
    "no split at all": (
        FakeBuilder({}),
        "--source=tfds:fake: splits none; expected a train split",
    ),
    "an empty split": (
        FakeBuilder({"train": [0, 1, 0, 1], "test": []}),
        "--source=tfds:fake: split 'test' has no images",
    ),
}


@pytest.mark.parametrize(("builder", "expected"), TFDS_REFUSALS.values(), ids=TFDS_REFUSALS.keys())
def test_a_tfds_source_that_is_no_labelled_image_dataset_is_refused_in_one_line(
    tmp_path: Path, fake_tfds: dict, builder: object, expected: str
) -> None:
    fake_tfds["builder"] = builder
    with pytest.raises(PreparationError) as error:
        prepare_dataset("tfds:fake", str(tmp_path / "out"), image_size=SIZE)
    assert str(error.value) == expected
    assert os.listdir(tmp_path) == []


def test_tied_remainders_give_the_extra_image_to_the_lower_classes() -> None:
    """Half of 1, 2, 3, 4 images thrice: six classes have half an image over, the first 3 get it."""
    sizes = [1, 2, 3, 4] * 3
    expected = [1, 1, 2, 2, 1, 1, 1, 2, 0, 1, 1, 2]
    assert splitting.allocate(sizes, 0.5).tolist() == expected
    items = [(f"c{label}/{i}", label) for label, n in enumerate(sizes) for i in range(n)]
    plans = splitting.plan_splits({"train": items}, {"validation": 0.5}, seed=0)
    validation = Counter(label for _, label in plans["validation"].items)
    assert [validation[label] for label in range(12)] == expected


# --- why a skipped image was skipped ---------------------------------------------------------


def test_a_file_gone_after_listing_and_one_read_badly_once_are_skipped_with_their_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reasons a user reads in the metadata: `unreadable file`, or a retry that decoded."""
    folder = make_folder(tmp_path / "src", {"cat": 10, "dog": 10})
    opened = sources.folder_source(str(folder))
    (folder / "dog" / "00.png").unlink()  # listed, then gone (or unreadable) when read
    reads: Counter[str] = Counter()
    read = opened.read

    def flaky(split: str, items: list) -> tf.data.Dataset:  # cat/01.jpg: bad bytes once
        reads.update(key for key, _ in items)
        data = read(split, items)
        if reads["cat/01.jpg"] > 1:
            return data
        swap = plain_swap("cat/01.jpg")
        return data.map(swap)

    monkeypatch.setattr(opened, "read", flaky)
    monkeypatch.setattr(prepare, "open_source", lambda spec: contextlib.nullcontext(opened))
    metadata = prepare_dataset(
        str(folder), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.1
    )

    assert sorted(metadata["skipped"], key=lambda s: s["file"]) == [
        {"file": "cat/01.jpg", "reason": "failed once, decoded on retry (transient read error?)"},
        {"file": "dog/00.png", "reason": "unreadable file"},
    ]
    assert sum(s["count"] for s in metadata["splits"].values()) == 18


def plain_swap(bad_key: str):
    """A tf.data map that gives `bad_key` undecodable bytes."""

    def swap(encoded: tf.Tensor, label: tf.Tensor, key: tf.Tensor):
        return tf.where(key == bad_key, tf.constant(b"not an image"), encoded), label, key

    return swap


def test_a_split_of_only_unreadable_images_is_refused_naming_it(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_folder(source / "train", {"cat": 6, "dog": 6})
    (source / "validation" / "cat").mkdir(parents=True)
    (source / "validation" / "cat" / "bad.png").write_bytes(b"not an image")
    with pytest.raises(PreparationError) as error:
        prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.5)
    assert str(error.value) == f"--source={source}: split 'validation' has no readable images"
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_the_modules_usage_names_its_required_flags_and_its_help_each_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    usage = capsys.readouterr().err
    assert usage.startswith("usage: python -m dataprep.prepare [-h] --source SOURCE --output")
    assert "the following arguments are required: --source, --output, --result" in usage
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "--overwrite replace a non-empty --output" in shown
    assert "--result RESULT local file for the result (JSON)" in shown
    assert "Prepare a dataset once for every trial and the final training." in shown


def test_a_bucket_listing_folders_with_a_trailing_slash_gives_the_same_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gs:// lists a folder as `name/`; the classes, keys and ignored files are the same."""
    source = make_folder(tmp_path / "src", {"cat": 3, "T-REX": 3})
    (source / "T-REX" / "notes.txt").write_text("not an image")
    listdir = tf.io.gfile.listdir

    def bucket_listdir(path: str) -> list[str]:
        return [n + "/" if os.path.isdir(os.path.join(path, n)) else n for n in listdir(path)]

    monkeypatch.setattr(tf.io.gfile, "listdir", bucket_listdir)
    opened = sources.folder_source(str(source))
    assert opened.class_names == ["T-REX", "cat"]
    assert sorted(key for key, _ in opened.splits["train"])[:2] == ["T-REX/00.png", "T-REX/01.jpg"]
    assert opened.ignored == ["T-REX/notes.txt"]


def test_the_prepared_sample_says_what_it_is(tmp_path: Path) -> None:
    metadata = prepare_dataset("sample", str(tmp_path / "out"), image_size=SIZE, num_shards=1)
    assert metadata["source_description"] == (
        "scikit-learn digits: 1,797 8x8 greyscale images of 10 digits"
    )
    assert metadata["splits"]["test"]["per_class"]["9"] == 18


def test_left_out_files_of_a_split_folder_are_named_with_their_split(tmp_path: Path) -> None:
    """In a `<split>/<class>/*` folder (whose path ends in X), what is said names the split."""
    source = tmp_path / "photosX"
    make_folder(source / "train", {"cat": 4, "dog": 4})
    make_folder(source / "test", {"cat": 1, "dog": 1})
    (source / "train" / "cat" / "notes.txt").write_text("not an image")
    (source / "test" / "dog" / "old").mkdir()
    (source / "test" / "dog" / "old" / "1.jpg").write_bytes(encode_image(1, "JPEG", "RGB"))
    metadata = prepare_dataset(f"{source}/", str(tmp_path / "out"), image_size=SIZE)

    assert metadata["source_description"] == f"image folder {source}"
    assert metadata["ignored"]["first"] == ["train/cat/notes.txt"]
    assert metadata["nested"] == {"test/dog/old": 1}
    assert metadata["splits"]["test"]["count"] == 2


def test_bad_images_in_the_last_split_written_count_toward_the_cap(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_folder(source / "train", {"cat": 5, "dog": 5})
    make_folder(source / "test", {"cat": 2, "dog": 2})
    for i in range(2):
        (source / "test" / "dog" / f"bad{i}.png").write_bytes(b"not an image")
    with pytest.raises(PreparationError, match=r"^--source=\S+: 2 of 16 images are unreadable"):
        prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.1)
    assert sorted(os.listdir(tmp_path)) == ["src"]
