"""One owner per folder: an OS lock (`fcntl.flock`) that dies with the process holding it.

A run takes `<output>/run.lock` before it writes anything else there, and a local
study takes `<study>/study.lock` while it runs trials, so two runs (or a run and the
orphaned study of a killed one) never write the same folder. The lock file keeps the
holder's pid and start time, for the refusal; the lock itself is the kernel's, released
when the holder exits however it exits (`kill -9` included), so a stale file never
blocks. The file's descriptor is not inherited by child processes.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import time
from collections.abc import Iterator


class BusyError(RuntimeError):
    """The folder is owned by another live process (the message names it)."""


def _holder(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        return f"pid {info['pid']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


@contextlib.contextmanager
def owned(path: str, what: str, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the lock at `path` for the block; raise `BusyError` when another process holds it.

    Args:
        path: The lock file (its folder is created).
        what: What is locked, for the message (e.g. `--output=runs/latest`).
        wait_s: How long to wait for the holder to let go before refusing.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(
                        f"{what} is in use by another run ({_holder(path)}); wait for it to "
                        "end or choose another output folder"
                    ) from None
                time.sleep(0.2)
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "started": started}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (a lock file, not a flag)
