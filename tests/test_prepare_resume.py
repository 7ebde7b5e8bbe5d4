"""Issue 52: a rerun of an interrupted preparation writes only the shards it lacks.

A real `python -m dataprep.prepare` is killed (SIGKILL) once its first split's shards are
written; the rerun keeps them (same inode) and writes the rest. A changed plan starts clean,
a truncated shard is written again, and `prepare` says what it kept in one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataprep import shards
from dataprep.prepare import PreparationError, prepare_dataset
from tests.test_prepare import CLASS_SIZES, SIZE, invoke_prepare, make_folder, shard_bytes
from trainer import records

# Prepare in a process that kills itself (SIGKILL: no clean-up runs) once a split is written.
KILLED_AFTER_TRAIN = """
import os, signal, sys
from dataprep import prepare, shards
write = shards.write_shards
def write_then_die(source, tasks, directory, **kw):
    results = write(source, tasks, directory, **kw)
    os.kill(os.getpid(), signal.SIGKILL)
shards.write_shards = write_then_die
prepare.prepare_dataset(sys.argv[1], sys.argv[2], image_size=int(sys.argv[3]))
"""


def _killed(source: Path, out: Path, size: int = SIZE) -> Path:
    """Run a preparation that dies after train's shards; return the stage it leaves."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_TRAIN, str(source), str(out), str(size)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    return out.with_name(f".{out.name}.partial")


def _inodes(folder: Path) -> dict[str, tuple[int, int]]:
    """Each shard's inode and modification time (a file written again changes them)."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.tfrecord")}


def test_a_rerun_after_a_kill_writes_only_the_missing_shards(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    stage = _killed(source, out)
    assert not out.exists()
    before = _inodes(stage)
    assert before and all(name.startswith("train-") for name in before)

    said: list[str] = []
    metadata = prepare_dataset(str(source), str(out), image_size=SIZE, say=said.append)

    after = _inodes(out)
    assert {name for name in before if after[name] == before[name]} == set(before)
    assert set(after) - set(before) == {
        s["file"] for split in ("validation", "test") for s in metadata["splits"][split]["shards"]
    }
    assert len(said) == 1 and said[0].startswith(f"kept {len(before)} of {len(after)} shard(s)")
    fresh = prepare_dataset(str(source), str(tmp_path / "fresh"), image_size=SIZE)
    assert shard_bytes(out) == shard_bytes(tmp_path / "fresh")
    assert {**metadata, "prepared_at": 0} == {**fresh, "prepared_at": 0}
    assert sorted(os.listdir(tmp_path)) == ["fresh", "out", "src"]  # no receipts, no stage
    assert not (out / shards.RECEIPTS_DIR).exists()


def test_a_truncated_shard_is_written_again_and_only_it(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    stage = _killed(source, tmp_path / "out")
    broken = sorted(_inodes(stage))[0]
    with open(stage / broken, "r+b") as f:
        f.truncate(10)
    before = _inodes(stage)

    prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE)

    after = _inodes(tmp_path / "out")
    assert {name for name in before if after[name] != before[name]} == {broken}
    records.read_metadata(str(tmp_path / "out"))


def test_a_changed_plan_starts_clean_and_says_so(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    stage = _killed(source, tmp_path / "out")
    before = _inodes(stage)

    said: list[str] = []
    metadata = prepare_dataset(
        str(source), str(tmp_path / "out"), image_size=SIZE + 8, say=said.append
    )

    after = _inodes(tmp_path / "out")
    assert not {name for name in before if after.get(name) == before[name]}
    assert len(said) == 1 and "another plan" in said[0] and "started clean" in said[0]
    assert metadata["image_shape"] == [SIZE + 8, SIZE + 8, 3]


def test_prepare_says_in_one_line_what_it_kept(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    _killed(source, tmp_path / "out")

    result = invoke_prepare(
        f"--source={source}", f"--output={tmp_path / 'out'}", f"--image-size={SIZE}"
    )

    assert result.exit_code == 0, result.output
    kept = [line for line in result.stderr.splitlines() if line.startswith("kept ")]
    assert len(kept) == 1 and "interrupted preparation of the same plan" in kept[0]


def test_a_refusal_still_leaves_nothing_beside_the_output(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    _killed(source, tmp_path / "out")
    for i in range(12):
        (source / "cat" / f"bad{i}.png").write_bytes(b"not an image")

    with pytest.raises(PreparationError, match="unreadable or corrupt"):
        prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, max_bad_fraction=0.1)

    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_an_interrupted_prepare_says_where_its_shards_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_folder(tmp_path / "src")
    args = (f"--source={source}", f"--output={tmp_path / 'out'}", f"--image-size={SIZE}")

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(records, "write_metadata", interrupted)
        result = invoke_prepare(*args)

    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == (  # after the progress lines
        f"hpt-pipeline: error: interrupted; the shards finished so far are kept in "
        f"{tmp_path}/.out.partial: rerun the same command to write only the others"
    )
    assert "Traceback" not in result.output
    again = invoke_prepare(*args)
    assert again.exit_code == 0 and "kept " in again.stderr


def _same_size_other_bytes(path: Path) -> None:
    """Change one byte in the middle of `path` (its size stays: only its sha256 tells)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_kept_shard_with_other_bytes_of_the_same_size_is_written_again(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    stage = _killed(source, tmp_path / "out")
    changed = sorted(_inodes(stage))[0]
    _same_size_other_bytes(stage / changed)
    before = _inodes(stage)

    said: list[str] = []
    prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, say=said.append)

    after = _inodes(tmp_path / "out")
    assert {name for name in before if after[name] != before[name]} == {changed}
    assert said[0].startswith(f"kept {len(before) - 1} of {len(after)} shard(s)")
    prepare_dataset(str(source), str(tmp_path / "fresh"), image_size=SIZE)
    assert shard_bytes(tmp_path / "out") == shard_bytes(tmp_path / "fresh")


def test_reuse_keeps_a_finished_dataset_of_the_same_plan_whole_and_says_where(
    tmp_path: Path,
) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    first = prepare_dataset(str(source), str(out), image_size=SIZE)
    before = _inodes(out) | {"metadata.json": _inode(out / "metadata.json")}

    said: list[str] = []
    again = prepare_dataset(
        str(source), str(out), image_size=SIZE, overwrite=True, reuse=True, say=said.append
    )

    assert _inodes(out) | {"metadata.json": _inode(out / "metadata.json")} == before
    assert again == first
    assert said == [
        f"reused the dataset prepared earlier at {out} ({len(before) - 1} shards, the same plan)"
    ]


def test_reuse_prepares_again_a_finished_dataset_whose_shard_changed(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    prepare_dataset(str(source), str(out), image_size=SIZE)
    changed = sorted(_inodes(out))[0]
    _same_size_other_bytes(out / changed)

    said: list[str] = []
    prepare_dataset(
        str(source), str(out), image_size=SIZE, overwrite=True, reuse=True, say=said.append
    )

    assert said == [
        f"{out}: {changed} is not the shard its metadata lists (missing, or another size or "
        "sha256); preparing it again"
    ]
    fresh = tmp_path / "fresh"
    prepare_dataset(str(source), str(fresh), image_size=SIZE)
    assert shard_bytes(out) == shard_bytes(fresh)


def test_reuse_prepares_again_when_the_source_gained_images(tmp_path: Path) -> None:
    source = make_folder(tmp_path / "src")
    out = tmp_path / "out"
    prepare_dataset(str(source), str(out), image_size=SIZE)
    extra = sorted((source / "cat").iterdir())[0]
    (source / "cat" / f"copy{extra.suffix}").write_bytes(extra.read_bytes())

    said: list[str] = []
    metadata = prepare_dataset(
        str(source), str(out), image_size=SIZE, overwrite=True, reuse=True, say=said.append
    )

    assert said == [f"{out}: a dataset of another plan; preparing it again"]
    assert sum(s["count"] for s in metadata["splits"].values()) == sum(CLASS_SIZES.values()) + 1


def _inode(path: Path) -> tuple[int, int]:
    return path.stat().st_ino, path.stat().st_mtime_ns
