"""An interrupted run is not a failed trial: what stopped a trial, the trainer or the run?

A local study runs as a step of `hpt-pipeline run`. When the run is interrupted (SIGINT,
SIGTERM or SIGHUP to it, a closed terminal, `docker stop`, a CI cancel) or dies (`kill -9`,
the OOM killer), its trials die with it: the preloaded trainer they were forked from dies
with the run. Those trials did not fail: `RunWatch` tells them apart, so the study records
them as interrupted (ACTIVE, `local.interrupted`), reruns them on resume and never counts
them against `max_failed_trial_count`. A trainer exiting non-zero while the run lives is
still a failure.

The run's death is seen as this process's parent changing (the step is orphaned); a
signal to this process itself is caught while the study runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

# Signals that mean "the run is being stopped" (SIGINT already raises KeyboardInterrupt).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.2
SIGNAL_DEATH_GRACE_S = 2.0  # how long a trial killed by a signal waits for the run's death


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (raised in the study's main thread)."""


class RunWatch:
    """Watches the run that started this study: set `interrupted` when it stops or dies."""

    def __init__(self, on_interrupt: Callable[[], None]):
        self.parent = os.getppid()
        self.interrupted = threading.Event()
        self.why = ""
        self._on_interrupt = on_interrupt
        self._done = threading.Event()

    def interrupt(self, why: str) -> None:
        """Mark the run interrupted (once) and stop the study's trials."""
        if not self.interrupted.is_set():
            self.why = why
            self.interrupted.set()
        self._on_interrupt()

    def run_gone(self) -> bool:
        """Whether the process that started this one has died (this one was orphaned)."""
        if os.getppid() != self.parent:
            self.interrupt("the run stopped (its process ended)")
        return self.interrupted.is_set()

    def stopped_by_run(self, exit_code: int | None) -> bool:
        """Whether a trial that did not succeed was stopped by the run rather than failing.

        A trial killed by a signal may die a moment before this process learns that the
        run has died (the preloaded trainer dies with the run, its children with it), so
        a signal death waits a little for that news.
        """
        if self.run_gone():
            return True
        if exit_code is None or exit_code >= 0:
            return False
        deadline = time.monotonic() + SIGNAL_DEATH_GRACE_S
        while time.monotonic() < deadline:
            if self.run_gone():
                return True
            time.sleep(POLL_S / 2)
        return False

    def _poll(self) -> None:
        while not self._done.wait(POLL_S):
            if self.run_gone():
                return

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Watch the parent in a thread and turn stop signals into `Interrupted` for the block."""
        thread = threading.Thread(target=self._poll, name="run-watch", daemon=True)
        thread.start()
        previous = {}
        if threading.current_thread() is threading.main_thread():

            def handler(signum: int, frame: object) -> None:
                self.interrupt(f"the run got {signal.Signals(signum).name}")
                raise Interrupted(signal.Signals(signum).name)

            for sig in STOP_SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # e.g. SIGHUP under nohup
                    previous[sig] = signal.signal(sig, handler)
        try:
            yield
        except KeyboardInterrupt:
            self.interrupt("the run got SIGINT")
            raise
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            self._done.set()
            thread.join()
