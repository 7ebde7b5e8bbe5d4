"""Start one replica's process: forked from the preloaded trainer when it can be, else afresh.

Either way the process leads its own process group (the executor signals the
group) and dies with what started it: a fresh one gets SIGKILL when the starting
thread ends (`PR_SET_PDEATHSIG`), a forked one when the requesting process ends
(see `fork_client`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs import fork_client

FORKED_NOTE = "# forked from the preloaded trainer"  # the log's second line
FRESH_NOTE = "# started afresh"  # … with the reason it could not be forked


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Child setup: own process group, and SIGKILL when the starting thread dies (Linux)."""
    os.setsid()
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # resolved now, not in the forked child
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def launch(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    fork_server: fork_client.ForkServer | None,
) -> tuple[subprocess.Popen[bytes] | fork_client.ForkedProcess, str, str]:
    """Start `argv` with `env` in `cwd`, output (stdout + stderr) on the process's `.stdout`.

    Returns:
        The process, how it started (`fork` or `exec`), and a line for its log
        ('' for a plain start with no server to ask).

    Raises:
        OSError: The command cannot be started.
    """
    note = ""
    if fork_server is not None and fork_server.serves(argv):
        forked = fork_server.spawn(argv, env, cwd)
        if isinstance(forked, fork_client.ForkedProcess):
            return forked, "fork", f"{FORKED_NOTE} (pid {forked.pid})\n"
        note = f"{FRESH_NOTE}: {forked}\n"
    process = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    return process, "exec", note
