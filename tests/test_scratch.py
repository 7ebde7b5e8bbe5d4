"""Temporary folders inside a run's output: pointed at, removed when done, kept on failure."""

from __future__ import annotations

import os
import tempfile

import pytest

from pipelines import scratch


def test_temporary_files_go_to_the_folder_which_goes_when_the_block_ends_well(tmp_path):
    before = (os.environ.get("TMPDIR"), tempfile.gettempdir())
    with scratch.process_tmpdir(tmp_path / "tmp", prefix="run-") as folder:
        assert folder.parent == tmp_path / "tmp" and folder.name.startswith("run-")
        assert all(os.environ[name] == str(folder) for name in scratch.TMP_VARIABLES)
        with tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", delete=False) as f:
            assert os.path.dirname(f.name) == str(folder)
    assert not (tmp_path / "tmp").exists()  # the folder, and its emptied parent
    assert (os.environ.get("TMPDIR"), tempfile.gettempdir()) == before


def test_a_failure_keeps_the_folder_and_names_it(tmp_path):
    with pytest.raises(RuntimeError) as err:
        with scratch.process_tmpdir(tmp_path / "tmp", prefix="run-") as folder:
            (folder / "ephemeral_component.py").write_text("")
            raise RuntimeError("a step failed")
    assert err.value.__notes__ == [f"temporary files kept in {folder}"]
    assert scratch.notes(err.value) == f"; temporary files kept in {folder}"
    assert (folder / "ephemeral_component.py").exists()


def test_a_failure_with_nothing_written_leaves_nothing(tmp_path):
    with pytest.raises(ValueError) as err:
        with scratch.process_tmpdir(tmp_path / "tmp", prefix="run-"):
            raise ValueError("bad input")
    assert scratch.notes(err.value) == ""
    assert not (tmp_path / "tmp").exists()
