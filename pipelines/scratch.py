"""Temporary folders inside a run's output, so a local run leaves nothing in the system's.

TensorFlow writes an `__autograph_generated_file*.py` per converted function to the
temporary folder and never removes it; kfp.local's subprocess runner writes each
step's `ephemeral_component.py` into a `mktemp -d` folder. Pointing `TMPDIR` (and
`TEMP`, `TMP`, Python's `tempfile.tempdir`) at a folder inside the run's output puts
all of that there; the folder is removed when its step ends well and kept, named in
the error, when it fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

TMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def tmp_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """The variables that send a child process's temporary files to `path`."""
    return {name: os.fspath(path) for name in TMP_VARIABLES}


def kept_note(path: str | os.PathLike[str]) -> str:
    """How an error names a temporary folder it kept."""
    return f"temporary files kept in {os.fspath(path)}"


def notes(err: BaseException) -> str:
    """An exception's notes (a kept folder's name among them) as `; note` suffixes."""
    return "".join(f"; {note}" for note in getattr(err, "__notes__", []))


def remove(path: str | os.PathLike[str], parent: str | os.PathLike[str] | None = None) -> None:
    """Remove a temporary folder, then `parent` too when that left it empty."""
    shutil.rmtree(path, ignore_errors=True)
    if parent is not None:
        with contextlib.suppress(OSError):
            os.rmdir(parent)  # only when empty


@contextlib.contextmanager
def temp_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Point `TMPDIR`, `TEMP`, `TMP` and `tempfile.tempdir` at `path`; restore them after."""
    saved = {name: os.environ.get(name) for name in TMP_VARIABLES}
    saved_tempdir = tempfile.tempdir
    os.environ.update(tmp_env(path))
    tempfile.tempdir = os.fspath(path)
    try:
        yield Path(path)
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def process_tmpdir(parent: str | os.PathLike[str], prefix: str) -> Iterator[Path]:
    """Send this process's (and its children's) temporary files to a new folder in `parent`.

    `TMPDIR`, `TEMP`, `TMP` and `tempfile.tempdir` point at `<parent>/<prefix>XXXX`
    meanwhile and are restored afterwards (`temp_folder`). The folder (and `parent`, when
    left empty) is removed when the block ends normally; on an exception it is kept, when
    not empty, and the exception gets a note naming it (`kept_note`).
    """
    os.makedirs(parent, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        with temp_folder(path):
            yield path
    except BaseException as err:
        if any(path.iterdir()):
            err.add_note(kept_note(path))
        else:  # nothing to look at
            remove(path, parent)
        raise
    else:
        remove(path, parent)
