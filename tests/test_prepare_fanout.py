"""Issue 52: the data step fanned out on the pipeline engine (plan → ParallelFor → finish).

The compiled Vertex and Kubeflow specs hold the loop (`iteratorPolicy.parallelismLimit`);
the three steps, run as the engine would run them, write the dataset one process writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dataprep import fanout_steps, shards
from dataprep.prepare import PreparationError, prepare_dataset
from pipelines.settings import Settings
from tests.test_pipeline_spec import compiled
from tests.test_prepare import SIZE, make_folder, shard_bytes
from trainer import records

FOUR_CLASSES = {"cat": 10, "dog": 10, "fish": 10, "bird": 10}


def _loop(spec: dict) -> tuple[str, dict, dict]:
    """The root's one for-loop task: its name, the task and its component's DAG."""
    loops = {n: t for n, t in spec["root"]["dag"]["tasks"].items() if n.startswith("for-loop")}
    assert len(loops) == 1, sorted(spec["root"]["dag"]["tasks"])
    ((name, task),) = loops.items()
    return name, task, spec["components"][task["componentRef"]["name"]]["dag"]


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_prepare_workers_fans_the_data_step_out_in_the_compiled_spec(tmp_path, target):
    spec = compiled(tmp_path, target, Settings(prepare_workers=3))
    tasks = spec["root"]["dag"]["tasks"]
    name, loop, body = _loop(spec)

    assert "prepare-dataset" not in tasks  # the one-step preparation is gone
    assert loop["iteratorPolicy"] == {"parallelismLimit": 3}
    items = loop["parameterIterator"]["items"]["inputParameter"]
    source = loop["inputs"]["parameters"][items]["taskOutputParameter"]
    assert source == {"producerTask": "plan-dataset", "outputParameterKey": "Output"}
    assert set(body["tasks"]) == {"prepare-group"}
    # finish takes every iteration's files (dsl.Collected) and outputs the dataset
    written = tasks["finish-dataset"]["inputs"]["parameters"]["written"]["taskOutputParameter"]
    assert written == {
        "producerTask": name,
        "outputParameterKey": "pipelinechannel--prepare-group-Output",
    }
    for consumer in ("trial-job-spec", "features-job-spec", "final-job-spec", "evaluate-model"):
        dataset = tasks[consumer]["inputs"]["artifacts"]["dataset"]["taskOutputArtifact"]
        assert dataset["producerTask"] == "finish-dataset", consumer
    # the plan and groups read outside state (the source): never cached
    assert not tasks["plan-dataset"].get("cachingOptions", {}).get("enableCache")
    assert not body["tasks"]["prepare-group"].get("cachingOptions", {}).get("enableCache")
    assert not tasks["finish-dataset"].get("cachingOptions", {}).get("enableCache")


@pytest.mark.parametrize(("target", "workers"), [("vertex", 1), ("kubeflow", 1), ("local", 3)])
def test_one_worker_or_the_local_target_keeps_one_data_step(tmp_path, target, workers):
    spec = compiled(tmp_path, target, Settings(prepare_workers=workers))
    tasks = spec["root"]["dag"]["tasks"]

    assert "prepare-dataset" in tasks and "plan-dataset" not in tasks
    assert not any(name.startswith("for-loop") for name in tasks)


def test_kubeflow_mounts_the_data_pvc_on_the_plan_every_group_and_the_finish(tmp_path):
    settings = Settings(data_pvc="hpt-data", data_mount_path="/mnt/hpt", prepare_workers=2)
    spec = compiled(tmp_path, "kubeflow", settings)
    executors = spec["platforms"]["kubernetes"]["deploymentSpec"]["executors"]

    for step in ("exec-plan-dataset", "exec-prepare-group", "exec-finish-dataset"):
        mounts = executors[step]["pvcMount"]
        assert [m["mountPath"] for m in mounts] == ["/mnt/hpt"], step


def _stamp(path: Path) -> tuple[int, int]:
    """A file's inode and modification time: both stay when the file is not written again."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def _artifact(path: Path) -> SimpleNamespace:
    return SimpleNamespace(uri=str(path), path=str(path), metadata={})


def _options(source: Path, groups: int, **options: object) -> dict:
    """The plan step's options: 20% validation and test, seed 7, raw records, no bad images."""
    return {
        "source": str(source),
        "groups": groups,
        "image_size": SIZE,
        "validation_fraction": 0.2,
        "test_fraction": 0.2,
        "seed": 7,
        "max_bad_fraction": 0.0,
        "record_format": "raw",
        **options,
    }


def _fan_out(source: Path, location: Path, groups: int, **options: object) -> dict:
    """The three steps as the engine runs them, each group on its own (in this process)."""
    location.mkdir(parents=True, exist_ok=True)
    planned = fanout_steps.plan_groups(str(location), _options(source, groups, **options))
    written = [fanout_steps.write_group(str(location), files) for files in planned]
    return fanout_steps.finish(str(location), written)


def test_the_fanned_out_steps_write_what_one_process_writes(tmp_path):
    source = make_folder(tmp_path / "src", FOUR_CLASSES)
    one = prepare_dataset(
        str(source),
        str(tmp_path / "one"),
        image_size=SIZE,
        validation_fraction=0.2,
        test_fraction=0.2,
        seed=7,
        record_format="raw",
    )
    fanned = _fan_out(source, tmp_path / "fan", groups=3)

    assert shard_bytes(tmp_path / "fan") == shard_bytes(tmp_path / "one")
    stamp = {"prepared_at": None}
    assert {**fanned, **stamp} == {**one, **stamp}
    assert records.read_metadata(str(tmp_path / "fan"))["splits"] == one["splits"]
    assert sorted(os.listdir(tmp_path / "fan")) == sorted(os.listdir(tmp_path / "one"))


def test_the_groups_split_the_tasks_evenly_in_plan_order():
    files = [f"f{i}" for i in range(8)]

    assert fanout_steps.split_evenly(files, 3) == [
        ["f0", "f1", "f2"],
        ["f3", "f4", "f5"],
        ["f6", "f7"],
    ]
    assert fanout_steps.split_evenly(files, 20) == [[f] for f in files]
    assert fanout_steps.split_evenly(files, 1) == [files]


def test_a_retried_group_keeps_the_shards_it_had_written(tmp_path):
    source = make_folder(tmp_path / "src", FOUR_CLASSES)
    location = tmp_path / "fan"
    location.mkdir()
    groups = fanout_steps.plan_groups(str(location), _options(source, 2))
    fanout_steps.write_group(str(location), groups[0])
    first = {f: _stamp(location / f) for f in groups[0]}
    os.remove(location / groups[0][-1])  # the one shard the failed try had not finished

    fanout_steps.write_group(str(location), groups[0])  # the retry

    again = {f: _stamp(location / f) for f in groups[0]}
    assert {f for f in first if first[f] == again[f]} == set(groups[0][:-1])


def test_finish_refuses_in_one_line_when_a_group_did_not_write_its_shards(tmp_path):
    source = make_folder(tmp_path / "src", FOUR_CLASSES)
    location = tmp_path / "fan"
    location.mkdir()
    groups = fanout_steps.plan_groups(str(location), _options(source, 2))
    written = [fanout_steps.write_group(str(location), groups[0])]

    with pytest.raises(PreparationError, match=r"planned shard\(s\) not written, first ") as err:
        fanout_steps.finish(str(location), written)
    assert "\n" not in str(err.value) and groups[1][0] in str(err.value)
    assert not (location / records.METADATA_FILE).exists()


def test_finish_counts_unreadable_images_against_the_cap(tmp_path):
    source = make_folder(tmp_path / "src", FOUR_CLASSES)
    for i in range(3):
        (source / "cat" / f"bad{i}.png").write_bytes(b"not an image")

    with pytest.raises(PreparationError, match=r"3 of 43 images are unreadable"):
        _fan_out(source, tmp_path / "fan", groups=2, max_bad_fraction=0.05)
    assert not (tmp_path / "fan" / records.METADATA_FILE).exists()
    metadata = _fan_out(source, tmp_path / "fan2", groups=2, max_bad_fraction=0.1)
    assert sorted(s["file"] for s in metadata["skipped"]) == [f"cat/bad{i}.png" for i in range(3)]


@pytest.mark.slow  # four fresh processes importing TensorFlow
def test_the_components_run_the_steps_through_their_module(tmp_path, monkeypatch):
    """The step shells' glue: options as JSON, the plan's folder, the dataset's location."""
    from components.prepare_fanout import finish_dataset, plan_dataset, prepare_group

    monkeypatch.setenv("HPT_FORK_SERVER", "off")
    source = make_folder(tmp_path / "src", FOUR_CLASSES)
    planned = _artifact(tmp_path / "planned")
    groups = plan_dataset.python_func(
        source=str(source),
        image_size=SIZE,
        validation_fraction=0.2,
        test_fraction=0.2,
        seed=7,
        shared_root="",
        max_bad_fraction=0.0,
        record_format="auto",
        prepare_workers=2,
        planned=planned,
    )
    written = [prepare_group.python_func(planned=planned, files=files) for files in groups]
    dataset = _artifact(tmp_path / "dataset")
    finish_dataset.python_func(planned=planned, written=written, dataset=dataset)

    assert len(groups) == 2 and sum(written, []) == sum(groups, [])
    assert dataset.metadata["location"] == str(tmp_path / "planned")
    assert dataset.metadata["counts"] == {"train": 24, "validation": 8, "test": 8}
    assert (
        json.loads((tmp_path / "planned" / shards.PLAN_FILE).read_text())["record_format"] == "raw"
    )
