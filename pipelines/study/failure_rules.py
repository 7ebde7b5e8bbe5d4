"""When failed trials stop a study: Vertex's `max_failed_trial_count` rules, as one function.

A failed trial is an INFEASIBLE one (exit code non-zero, timeout, no metric);
a cancelled trial (the study stopped it) is not a failure. A diverged trial
reports a finite worst-case metric and exits 0 (a service records it SUCCEEDED;
the artifact INFEASIBLE, `trials.mark_diverged`): a poor trial, it never counts here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib
from pipelines.study.trials import TrialState
from trainer.contract import EXIT_SETUP_ERROR, TRAINER

# With max_failed_trial_count=0: stop once this many trials failed and failures outnumber successes.
DEFAULT_FAILURE_FLOOR = 3
OUT_OF_DISK = "No space left on device"  # ENOSPC's text, as Python and TensorFlow print it


def out_of_disk(text: str) -> str | None:
    """`out of disk space: <the line>` when `text` (a log tail) says the disk is full."""
    line = next((x.strip() for x in text.splitlines()[::-1] if OUT_OF_DISK in x), None)
    return f"out of disk space: {line}" if line else None


def trainer_error(log_tail: str) -> str | None:
    """The trainer's own one-line error (`trainer: error: …`) in a log tail, if any."""
    return next(
        (x.strip() for x in log_tail.splitlines()[::-1] if x.startswith(f"{TRAINER}: error:")),
        None,
    )


def counts_as_failed(trial: Mapping[str, Any]) -> bool:
    """Whether a trial eats the failure budget (INFEASIBLE, not cancelled, not diverged)."""
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    infeasible = trials_lib.trial_state(trial) == TrialState.INFEASIBLE
    return infeasible and not local.get("cancelled") and not trials_lib.is_diverged(trial)


def stop_reason(trials: Sequence[Mapping[str, Any]], max_failed_trial_count: int) -> str | None:
    """Why the failure rules stop the study now, or None.

    * `max_failed_trial_count` > 0: the study fails once that many trials have
      failed (Vertex: "the number of failed Trials that need to be seen before
      failing the HyperparameterTuningJob"; AI Platform's docs: training ends after
      this number of failed trials). One fewer failure is still tolerated.
    * Whatever the budget, a trial the trainer refused at set-up (exit code
      `EXIT_SETUP_ERROR`: its weights or data cannot be had) stops the study: every
      other trial would fail the same way.
    * 0 (Vertex decides): the first trial failing stops the study, since it points
      at the training code; later, at least `DEFAULT_FAILURE_FLOOR` failures that
      outnumber the successes stop it (the local stand-in for Vertex's choice).

    Args:
        trials: The study's trials, in id order.
        max_failed_trial_count: The study's failure budget.
    """
    failed = [t for t in trials if counts_as_failed(t)]
    succeeded = [t for t in trials if trials_lib.trial_state(t) == TrialState.SUCCEEDED]
    common = next(
        (
            t
            for t in failed
            if (t.get(trials_lib.LOCAL_KEY) or {}).get("exitCode") == EXIT_SETUP_ERROR
        ),
        None,
    )
    if common is not None:  # weights, data: every trial would fail the same way
        return f"trial {common.get('id')} failed: {common.get('infeasibleReason', '')}"
    if max_failed_trial_count == 0:
        first = next((t for t in trials if str(t.get("id")) == "1"), None)
        if first is not None and counts_as_failed(first):
            return (
                "the first trial failed, which points at the training code, so the study "
                f"stopped (Vertex's rule): {first.get('infeasibleReason', '')}"
            )
        if len(failed) >= DEFAULT_FAILURE_FLOOR and len(failed) > len(succeeded):
            return (
                f"{len(failed)} trials failed, more than succeeded ({len(succeeded)}); "
                "set max_failed_trial_count to choose the limit"
            )
    elif len(failed) >= max_failed_trial_count:
        return (
            f"{len(failed)} trials failed, reaching max_failed_trial_count="
            f"{max_failed_trial_count}; last: {failed[-1].get('infeasibleReason', '')}"
        )
    return None
