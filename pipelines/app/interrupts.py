"""A local run stopped by a signal stops as Ctrl-C stops it: its steps are told first.

SIGTERM (`kill PID`, `docker stop`, a CI cancel) and SIGHUP (a closed terminal) to the
`hpt-pipeline run` process are forwarded as SIGTERM to the steps it started (the study
then keeps its running trials to rerun, `pipelines.study.interruption`), then raise
`RunInterrupted` in the run; the run waits for the steps to record what they did before
it says how to resume. Ctrl-C reaches every process of the terminal's group by itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
STEP_WAIT_S = 30.0  # for the steps to stop their trials and record them


class RunInterrupted(KeyboardInterrupt):
    """The run got a stop signal; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def children(pid: int | None = None) -> list[int]:
    """Process ids whose parent is `pid` (default: this process); [] where /proc is missing."""
    pid = os.getpid() if pid is None else pid
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def exit_code(error: KeyboardInterrupt) -> int:
    """The shell's code for a run stopped by a signal: 128 + its number (Ctrl-C: 130)."""
    return 128 + (error.signum if isinstance(error, RunInterrupted) else signal.SIGINT)


def wait_for(pids: list[int], seconds: float = STEP_WAIT_S) -> None:
    """Wait until the processes `pids` have ended (they are this process's children)."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


@contextlib.contextmanager
def forwarded(keep: set[int]) -> Iterator[list[int]]:
    """Forward stop signals to this process's children but `keep`; raise `RunInterrupted`.

    Yields the list the signalled children are put in, to `wait_for` them.
    """
    signalled: list[int] = []

    def handler(signum: int, frame: object) -> None:
        for pid in children():
            if pid not in keep:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                signalled.append(pid)
        raise RunInterrupted(signum)

    main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = {
        sig: signal.signal(sig, handler)
        for sig in STOP_SIGNALS
        if main and signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield signalled
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
