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
def staged_directory(
    output: str,
    *,
    markers: Sequence[str],
    resumable: bool = False,
    discard_on: tuple[type[BaseException], ...] = (),
) -> Iterator[str]:
    """Yield a directory to write into that becomes `output` only if the block succeeds.

    An existing `output` is replaced, so callers decide beforehand whether that is
    allowed.

    Args:
        output: Final directory (local or gs://).
        markers: Files whose presence means "complete"; on object stores they are
            deleted first from an existing `output` and copied last.
        resumable: The stage is `.<name>.partial` beside `output`, whatever an earlier
            run left there included, and a failure keeps it for the next run to go on
            from (one writer per output at a time); else a fresh stage, removed on failure.
        discard_on: Failures that remove even a resumable stage (a refusal: going on
            from it would be refused again).
    """
    if is_local(output):
        with _local_stage(output, resumable, discard_on) as stage:
            yield stage
    else:
        with _object_store_stage(output, markers, resumable, discard_on) as stage:
            yield stage


def resumable_stage(output: str) -> str:
    """Where a resumable `staged_directory` of `output` writes: `.<name>.partial` beside it."""
    output = output.rstrip("/")
    if is_local(output):
        output = os.path.abspath(output)
    parent, name = posixpath.split(output)
    return posixpath.join(parent, _stage_name(name, True))


def _stage_name(name: str, resumable: bool) -> str:
    return f".{name}.partial" if resumable else f".{name}.partial-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def _local_stage(
    output: str, resumable: bool, discard_on: tuple[type[BaseException], ...]
) -> Iterator[str]:
    output = os.path.abspath(output)
    parent, name = os.path.split(output)
    os.makedirs(parent, exist_ok=True)
    stage = os.path.join(parent, _stage_name(name, resumable))
    os.makedirs(stage, exist_ok=resumable)
    try:
        yield stage
        _replace_directory(stage, output)
    except BaseException as error:
        if not resumable or isinstance(error, discard_on):
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
def _object_store_stage(
    output: str,
    markers: Sequence[str],
    resumable: bool,
    discard_on: tuple[type[BaseException], ...],
) -> Iterator[str]:
    output = output.rstrip("/")
    parent, name = posixpath.split(output)
    stage = posixpath.join(parent, _stage_name(name, resumable))
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
    except BaseException as error:
        if resumable and not isinstance(error, discard_on):
            raise  # kept for the next run
        _discard(stage)
        raise
    _discard(stage)


def _discard(stage: str) -> None:
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
