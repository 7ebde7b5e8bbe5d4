"""What one local study runs: the Vertex HPT payload, checked, plus the local run's options.

`run_study` builds a `StudyPlan` with `checked_payload` before anything runs (a bad payload is
refused in one line), and the study loop (`local_study._LocalStudy`) reads only the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.payloads import payload_items
from pipelines.study import spec_reader
from pipelines.study.budgets import Budgets
from pipelines.study.halving import HALVING, SCHEDULERS, Halving
from pipelines.study.optuna_study import EarlyStopping
from pipelines.study.progress_lines import StudyProgress
from pipelines.study.search_space import SearchSpace


class StudyError(RuntimeError):
    """The study cannot start, or stopped under the failure rules (message says why)."""


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    """One study, checked (the fields: `run_study`'s arguments of the same meaning).

    Attributes:
        space: The search space and metrics the payload's study spec describes.
        spec_payload: The study spec as saved in `study.json` (a rerun must match it).
        worker_pool_specs: The trial job's pools, decoded.
        base: Absolute local folder of the study.
        max_trial_count: Trials in total.
        parallel: Trials at once (at most `max_trial_count`).
        max_failed: The failure budget (`failure_rules`).
        algorithm: The study spec's algorithm.
        selection: The measurement selection applied (`applied_selection`).
        early_stopping: The median rule, or None.
        halving: Successive halving (`asha`, `hyperband`), or None.
        budgets: The study's wall clock and trials without progress.
        seed: Sampler seed.
        trial_timeout: Seconds a trial may run.
        on_progress: Called with a `StudyProgress` whenever a trial starts or ends.
        show_progress: Live progress on stderr.
        cwd: Working directory of the trial processes.
        earlier: Trials of the run this study continues.
    """

    space: SearchSpace
    spec_payload: dict[str, Any]
    worker_pool_specs: list[dict[str, Any]]
    base: str
    max_trial_count: int
    parallel: int
    max_failed: int
    algorithm: str
    selection: str
    early_stopping: EarlyStopping | None = None
    halving: Halving | None = None
    budgets: Budgets = Budgets()
    seed: int | None = None
    trial_timeout: float | None = None
    on_progress: Callable[[StudyProgress], None] | None = None
    show_progress: bool = True
    cwd: str | None = None
    earlier: Sequence[Mapping[str, Any]] = ()


def halving_plan(scheduler: str, rungs: tuple[int, int, int], primary: Any) -> Halving | None:
    """The successive-halving schedule `scheduler` asks for (None: not asha or hyperband).

    Raises:
        StudyError: An unknown scheduler, or rungs that leave nothing to halve (one line).
    """
    if scheduler not in SCHEDULERS:
        raise StudyError(f"scheduler={scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    if scheduler not in HALVING:
        return None
    min_epochs, factor, epochs = (int(x) for x in rungs)
    if not (1 <= min_epochs < epochs and factor >= 2):
        raise StudyError(
            f"scheduler={scheduler} with min_epochs={min_epochs}, reduction_factor={factor}, "
            f"epochs={epochs}: expected 1 <= min_epochs < epochs and reduction_factor >= 2"
        )
    return Halving(scheduler, min_epochs, factor, epochs, primary.metric_id, primary.goal)


def checked_payload(
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    study_spec_metrics: Sequence[Mapping[str, Any] | str],
    study_spec_parameters: Sequence[Mapping[str, Any] | str],
    algorithm: str,
    selection_type: str,
    counts: tuple[Any, Any, Any],
) -> dict[str, Any]:
    """The payload's `StudyPlan` fields, checked (`counts`: max, parallel, failed trials).

    Raises:
        StudyError, SearchSpaceError, PayloadError: a bad payload (one line).
    """
    from pipelines.jobs.worker_pools import validate_worker_pool_specs
    from pipelines.study.study_spec_check import applied_selection, validate_study_spec

    max_trials, parallel, max_failed = _checked_counts(*counts)
    parameters, metrics = payload_items(study_spec_parameters), payload_items(study_spec_metrics)
    validate_study_spec(parameters, metrics, algorithm, selection_type)
    selection = applied_selection(selection_type)
    pools = payload_items(worker_pool_specs)
    validate_worker_pool_specs(pools)
    return dict(
        space=spec_reader.from_study_spec(parameters, metrics),
        spec_payload={
            "parameters": parameters,
            "metrics": metrics,
            "algorithm": algorithm,
            "measurementSelectionType": selection,
        },
        worker_pool_specs=pools,
        max_trial_count=max_trials,
        parallel=min(parallel, max_trials),
        max_failed=max_failed,
        algorithm=algorithm,
        selection=selection,
    )


def _checked_counts(max_trial: Any, parallel: Any, max_failed: Any) -> tuple[int, int, int]:
    """The study's three counts as integers (kfp.local may hand floats), each in range."""
    counts = {
        "max_trial_count": (int(max_trial), 1),
        "parallel_trial_count": (int(parallel), 1),
        "max_failed_trial_count": (int(max_failed), 0),
    }
    for name, (value, least) in counts.items():
        if value < least:
            raise StudyError(f"{name}={value}: expected >= {least}")
    return int(max_trial), int(parallel), int(max_failed)
