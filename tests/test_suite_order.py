"""`make test` runs two pytest workers over whole files, the files with slow tests first."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import ROOT, pytest_collection_modifyitems


class Item:
    """The part of a collected `pytest.Item` the ordering reads."""

    def __init__(self, path: str, name: str, slow: bool = False):
        self.path, self.name, self.slow = Path(path), name, slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def collected() -> list[Item]:
    return [
        Item("test_a.py", "a1"),
        Item("test_b.py", "b1"),
        Item("test_b.py", "b2", slow=True),
        Item("test_c.py", "c1"),
        Item("test_d.py", "d1", slow=True),
        Item("test_d.py", "d2"),
    ]


def test_under_two_workers_files_with_slow_tests_go_first_each_file_whole_and_in_order():
    items = collected()
    pytest_collection_modifyitems(SimpleNamespace(workerinput={"workerid": "gw0"}), items)
    assert [i.name for i in items] == ["b1", "b2", "d1", "d2", "a1", "c1"]


def test_a_serial_run_keeps_pytests_order():
    items = collected()
    pytest_collection_modifyitems(SimpleNamespace(option=SimpleNamespace(numprocesses=None)), items)
    assert [i.name for i in items] == ["a1", "b1", "b2", "c1", "d1", "d2"]


def test_make_test_runs_two_workers_over_whole_files():
    import xdist  # noqa: F401 - the dev extra installs pytest-xdist

    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "-m pytest -n 2 --dist loadfile --no-loadscope-reorder" in dry
    serial = subprocess.run(
        ["make", "-n", "test", "XDIST="], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "-m pytest" in serial and "-n 2" not in serial
