"""`RunWatch`'s verdicts in this process, where mutmut can see which test reaches them.

`tests/test_interruption.py` checks the same rules across real processes (a run killed, a
study orphaned); mutmut attributes a test to a function only when the test's own process
calls it, so those tests leave `interruption.py`'s mutants "not covered". Here the run's
death is the watch's recorded parent no longer being this process's parent, changed by a
timer as an orphaning would change it (docs/mutation.md).
"""

from __future__ import annotations

import signal
import threading

from pipelines.study import interruption


def dies_after(watch: interruption.RunWatch, seconds: float) -> threading.Timer:
    """The run `watch` watches dies `seconds` from now (this process is orphaned)."""
    timer = threading.Timer(seconds, setattr, (watch, "parent", -1))
    timer.start()
    return timer


def test_a_signal_death_just_before_the_run_dies_is_the_runs_doing_and_says_why(monkeypatch):
    monkeypatch.setattr(interruption, "SIGNAL_DEATH_GRACE_S", 10.0)  # a loaded machine
    stopped: list[bool] = []
    watch = interruption.RunWatch(lambda: stopped.append(True))
    timer = dies_after(watch, 0.5)  # the trial died first; the news of the run comes after
    assert watch.stopped_by_run(-signal.SIGKILL) is True
    timer.join()
    assert stopped == [True]
    assert watch.why == "the run stopped (its process ended)"


def test_a_trainer_that_exits_by_itself_is_judged_at_once_even_if_the_run_dies_next(monkeypatch):
    monkeypatch.setattr(interruption, "SIGNAL_DEATH_GRACE_S", 10.0)
    for code in (0, 3, None):
        watch = interruption.RunWatch(lambda: None)
        timer = dies_after(watch, 1.0)
        assert watch.stopped_by_run(code) is False, code  # before the run's death is news
        timer.join()
        assert watch.stopped_by_run(code) is True  # after it, every trial is the run's


def test_the_first_reason_to_stop_is_the_one_recorded():
    told: list[bool] = []
    watch = interruption.RunWatch(lambda: told.append(True))
    watch.interrupt("the run got SIGTERM")
    watch.interrupt("the run got SIGINT")
    assert watch.why == "the run got SIGTERM" and told == [True, True]
