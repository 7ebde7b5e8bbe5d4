"""All-or-nothing output directories: a failed or interrupted write leaves nothing that looks done.

Everything is written into a hidden sibling directory first. Locally it is
renamed into place at the end. Object stores (gs://, anything with a scheme)
have no directory rename: the finished files are copied over with the
completeness markers (``metadata.json``, ``saved_model.pb``…) last, after the
old markers were deleted, so a reader never finds a complete-looking but
partial directory.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import uuid
from collections.abc import Iterator, Sequence

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
def staged_directory(output: str, *, markers: Sequence[str]) -> Iterator[str]:
    """Yield a directory to write into that becomes `output` only if the block succeeds.

    An existing `output` is replaced, so callers decide beforehand whether that is
    allowed.

    Args:
        output: Final directory (local or gs://).
        markers: Files whose presence means "complete"; on object stores they are
            deleted first from an existing `output` and copied last.
    """
    if is_local(output):
        with _local_stage(output) as stage:
            yield stage
    else:
        with _object_store_stage(output, markers) as stage:
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
def _object_store_stage(output: str, markers: Sequence[str]) -> Iterator[str]:
    output = output.rstrip("/")
    parent, name = posixpath.split(output)
    stage = posixpath.join(parent, f".{name}.partial-{uuid.uuid4().hex[:8]}")
    tf.io.gfile.makedirs(stage)
    try:
        yield stage
        _remove(output, markers)
        files = [
            posixpath.join(root, f) for root, _, names in tf.io.gfile.walk(stage) for f in names
        ]
        files.sort(key=lambda p: (posixpath.basename(p) in markers, p))
        for src in files:
            dst = posixpath.join(output, posixpath.relpath(src, stage))
            tf.io.gfile.makedirs(posixpath.dirname(dst))
            tf.io.gfile.copy(src, dst, overwrite=True)
    finally:
        if tf.io.gfile.exists(stage):
            tf.io.gfile.rmtree(stage)


def _remove(path: str, markers: Sequence[str]) -> None:
    """Delete `path`, its markers first so that it stops looking complete at once."""
    for marker in markers:
        marker_path = posixpath.join(path, marker)
        if tf.io.gfile.exists(marker_path):
            tf.io.gfile.remove(marker_path)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
