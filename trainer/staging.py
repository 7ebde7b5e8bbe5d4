"""All-or-nothing output directories: a failed or interrupted write leaves nothing that looks done.

Local paths are written into a hidden sibling directory that is renamed into
place at the end. Object stores (gs://, anything with a scheme) have no
directory rename: files are written in place, the caller writes its
completeness marker (e.g. ``metadata.json``) last, and a failure removes what
was written.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import uuid
from collections.abc import Iterator

import tensorflow as tf


def is_local(path: str) -> bool:
    """Whether `path` is on the local file system (no ``scheme://``)."""
    return "://" not in path


def has_content(path: str) -> bool:
    """Whether `path` exists and is a file or a non-empty directory."""
    if not tf.io.gfile.exists(path):
        return False
    return not tf.io.gfile.isdir(path) or bool(tf.io.gfile.listdir(path))


@contextlib.contextmanager
def staged_directory(output: str, *, marker: str) -> Iterator[str]:
    """Yield a directory to write into that becomes `output` only if the block succeeds.

    An existing `output` is replaced, so callers decide beforehand whether that is
    allowed.

    Args:
        output: Final directory (local or gs://).
        marker: File the caller writes last; on object stores it is deleted first
            when an existing `output` is replaced.
    """
    if is_local(output):
        with _local_stage(output) as stage:
            yield stage
    else:
        with _in_place(output, marker) as stage:
            yield stage


@contextlib.contextmanager
def _local_stage(output: str) -> Iterator[str]:
    output = os.path.abspath(output)
    parent, name = os.path.split(output)
    os.makedirs(parent, exist_ok=True)
    stage = os.path.join(parent, f".{name}.partial-{uuid.uuid4().hex[:8]}")
    os.mkdir(stage)
    try:
        yield stage
        _replace_directory(stage, output)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _replace_directory(source: str, target: str) -> None:
    """Rename `source` to `target`, replacing whatever `target` was."""
    old = None
    if os.path.isdir(target) and not os.listdir(target):
        os.rmdir(target)
    elif os.path.lexists(target):
        parent, name = os.path.split(target)
        old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(target, old)
    os.rename(source, target)
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old)
        else:
            os.remove(old)


@contextlib.contextmanager
def _in_place(output: str, marker: str) -> Iterator[str]:
    _remove(output, marker)
    tf.io.gfile.makedirs(output)
    try:
        yield output
    except BaseException:
        _remove(output, marker)
        raise


def _remove(path: str, marker: str) -> None:
    """Delete `path`, its marker first so that it stops looking complete at once."""
    marker_path = posixpath.join(path, marker)
    if tf.io.gfile.exists(marker_path):
        tf.io.gfile.remove(marker_path)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
