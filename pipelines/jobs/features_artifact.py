"""The features step's artifact: where the cache is, which depths, reused or computed, how long.

Trials and the final job read `features_dir` from its metadata (`trainer_args.features_flag`);
the run log and the run summary read the rest. Whether the job reused the cache or computed it
is seen from a local folder itself: an entry that appeared or was rewritten means computed
(a gs:// cache is `done`: its job's log says which).
"""

from __future__ import annotations

import os
import time
from typing import Any

from pipelines.jobs.trainer_args import FEATURES_DIR_KEY, LOCATION_KEY

COMPUTED, REUSED, SKIPPED = "computed", "reused", "skipped"
DONE = "done"  # a cache in object storage: the job's own log says whether it reused it


def clock() -> float:
    """Seconds on a monotonic clock: the step's duration is the difference of two readings."""
    return time.monotonic()


def entries(folder: str) -> dict[str, int] | None:
    """The cache folder's entries and their modification times (None: not a local folder)."""
    if not folder or "://" in folder:
        return None
    if not os.path.isdir(folder):
        return {}
    return {  # a hidden entry is one being written (renamed into place when complete)
        e.name: e.stat().st_mtime_ns for e in os.scandir(folder) if not e.name.startswith(".")
    }


def outcome(before: dict[str, int] | None, after: dict[str, int] | None) -> str:
    """`computed` when an entry appeared or was rewritten between the snapshots, else `reused`.

    `done` for a folder this process cannot list (object storage): the job's log says which.
    """
    if before is None or after is None:
        return DONE
    return COMPUTED if any(before.get(name) != mtime for name, mtime in after.items()) else REUSED


def describe(
    artifact: Any,
    *,
    features_dir: str,
    trainable_blocks: str,
    reason: str,
    seconds: float,
    result: str,
) -> str:
    """Record the step on `artifact`; return its one line for the run log."""
    artifact.metadata.update(
        {
            FEATURES_DIR_KEY: features_dir,
            "trainable_blocks": trainable_blocks,
            "reason": reason,
            "result": result,
            "seconds": round(float(seconds), 2),
        }
    )
    if features_dir:
        artifact.metadata[LOCATION_KEY] = features_dir
    if result == SKIPPED:
        return f"features step: skipped ({reason})"
    return (
        f"features step: {result} trainable_blocks {trainable_blocks} in {seconds:.1f} s "
        f"→ {features_dir}"
    )
