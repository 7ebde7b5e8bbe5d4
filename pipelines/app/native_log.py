"""TensorFlow run in this process: its start-up chatter to a log file, our output to the terminal.

TensorFlow's C++ code (and absl's) writes straight to file descriptor 2: oneDNN and
`cpu_feature_guard` notes, "WARNING: All log messages before absl::InitializeLog",
`I0000`/`W0000`/`E0000` lines such as "Local rendezvous is aborting" or a corrupt JPEG's
"Premature end of JPEG data". Replacing `sys.stderr` cannot catch those; `stderr_to_file`
points descriptor 2 itself at a log file and hands back a stream on the terminal the
process had, for the command's own (Rich) output.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

STDERR_FD = 2


def _writes_to_fd_2(stream: TextIO) -> bool:
    try:
        return stream.fileno() == STDERR_FD
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # a stand-in (a test runner's buffer): not descriptor 2


@contextlib.contextmanager
def stderr_to_file(path: str | Path) -> Iterator[TextIO]:
    """Append everything written to descriptor 2 meanwhile to `path`; yield the terminal.

    The yielded stream writes where stderr went before: a copy of descriptor 2 when
    `sys.stderr` was it, else `sys.stderr` itself (a stand-in that the redirect does not
    touch). Python's own writes to `sys.stderr` (warnings, logging) go to the file too
    while it is descriptor 2. Descriptor 2 is restored on the way out, exceptions
    included, so an error printed after the block reaches the terminal.
    """
    sys.stderr.flush()
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(STDERR_FD)
    terminal: TextIO = (
        os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
        if _writes_to_fd_2(sys.stderr)
        else sys.stderr
    )
    try:
        os.dup2(log_fd, STDERR_FD)
        yield terminal
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, STDERR_FD)
        os.close(saved)
        os.close(log_fd)
        if terminal is not sys.stderr:
            terminal.close()


def new_log_file(path: str | Path) -> Path:
    """`path` as an empty log file (its folder created; an older log there replaced)."""
    log = Path(path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    return log


def keep_if_written(path: Path) -> Path | None:
    """`path` when something was logged to it; else remove it and return None."""
    try:
        if path.stat().st_size > 0:
            return path
        path.unlink()
    except OSError:
        pass
    return None
