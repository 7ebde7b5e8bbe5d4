"""Benchmark helpers compute what they claim, and the cheapest benchmark runs and writes JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import bench_pipeline, common, run_all
from tests.conftest import ROOT, run_env


def test_median_ratio_and_steady():
    assert common.median([3.0, 1.0, 2.0]) == 2.0
    assert common.median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        common.median([])
    assert common.ratio(6.0, 3.0) == 2.0
    assert common.ratio(1.0, 0.0) is None
    assert common.steady([9.0, 1.0, 2.0]) == [1.0, 2.0]
    assert common.steady([9.0]) == [9.0]  # never empty


def test_repeat_and_timed():
    calls = []
    times = common.repeat(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(times) == 3 and all(t >= 0 for t in times)
    assert len(calls) == 5
    seconds, value = common.timed(lambda: 42)
    assert value == 42 and seconds >= 0


def test_union_of_intervals():
    assert bench_pipeline.union_seconds([(0, 2), (1, 3), (5, 6)]) == 4
    assert bench_pipeline.union_seconds([(0, 10), (2, 3)]) == 10
    assert bench_pipeline.union_seconds([]) == 0


def test_write_result_and_readme_table(tmp_path):
    path = common.write_result(
        "demo", {"x": 1.5}, headline=[["speed-up", "2.0×"]], quick=True, results_dir=tmp_path
    )
    document = json.loads(path.read_text())
    assert document["name"] == "demo" and document["quick"] is True
    assert document["figures"] == {"x": 1.5}
    assert document["headline"] == [["speed-up", "2.0×"]]
    assert {"platform", "cpus", "tensorflow"} <= set(document["machine"])
    assert document["commit"] and document["date"]

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{run_all.BEGIN}\nold\n{run_all.END}\noutro\n")
    run_all.update_readme(run_all.results_table({"demo": document}), readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert "| demo | speed-up | 2.0× |" in text and "quick settings" in text


def test_startup_benchmark_runs_and_writes_json(tmp_path):
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_startup",
            "--quick",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    document = json.loads((tmp_path / "startup.json").read_text())
    assert document["figures"]["tensorflow_free"] is True
    assert set(document["figures"]["commands"]) == {"help", "compile_vertex"}
    assert all(c["median_seconds"] > 0 for c in document["figures"]["commands"].values())
