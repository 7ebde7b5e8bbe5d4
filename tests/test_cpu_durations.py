"""The suite's CPU-seconds plugin sums what it says (docs/testing.md's figures come from it)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import cpu_durations


def test_per_file_sums_each_files_tests():
    lines = [
        json.dumps({"id": "tests/test_a.py::one", "wall": 2.0, "cpu": 1.0}),
        json.dumps({"id": "tests/test_a.py::two[x]", "wall": 3.0, "cpu": 0.5}),
        json.dumps({"id": "tests/test_b.py::three", "wall": 1.0, "cpu": 4.0}),
    ]
    assert cpu_durations.per_file(lines) == {
        "tests/test_a.py": (2, 5.0, 1.5),
        "tests/test_b.py": (1, 1.0, 4.0),
    }


def test_a_reaped_childs_work_counts_and_its_waiting_does_not():
    before = cpu_durations.cpu_seconds()
    busy = "import time\nwhile time.process_time() < 0.4: pass"
    subprocess.run([sys.executable, "-c", busy], check=True)
    assert cpu_durations.cpu_seconds() - before >= 0.4
    before = cpu_durations.cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time; time.sleep(0.4)"], check=True)
    assert cpu_durations.cpu_seconds() - before < 0.35


def test_the_summary_lists_the_costliest_file_first(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps({"id": "tests/test_a.py::one", "wall": 2.0, "cpu": 1.0})
        + "\n"
        + json.dumps({"id": "tests/test_b.py::two", "wall": 1.0, "cpu": 4.0})
        + "\n"
    )
    assert cpu_durations.main([str(path), "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 tests, 5 CPU s, 3 wall s"
    assert len(out) == 2 and out[1].startswith("tests/test_b.py")
