"""The local study in Optuna's terms: its sampler, its pruner, and what it learns on resume.

A resumed study replays its finished trials (read from the trials artifact, in the
Vertex Trial schema) into a fresh Optuna study, so the sampler learns from them and
the median rule compares against them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pipelines.study import continuation
from pipelines.study import trials as trials_lib
from pipelines.study.options import MEDIAN_STOP_MIN_TRIALS, MEDIAN_STOP_START_STEP
from pipelines.study.sampler import distribution, grid_points, make_sampler, suggest, to_internal
from pipelines.study.search_space import Parameter, SearchSpace, SearchSpaceError
from pipelines.study.trials import TrialState

MAX_REPEATS = 50  # proposals of measured configurations skipped before the study ends


@dataclasses.dataclass(frozen=True)
class EarlyStopping:
    """The median stopping rule (Optuna `MedianPruner`).

    Attributes:
        min_trials: Completed trials needed before any trial can be stopped.
        warmup_steps: Steps (epochs) below this are never judged.
    """

    min_trials: int = MEDIAN_STOP_MIN_TRIALS
    warmup_steps: int = MEDIAN_STOP_START_STEP


def trial_params(trial: Mapping[str, Any], params_by_id: Mapping[str, Parameter]) -> dict[str, Any]:
    """A trial's parameters, each in its parameter's type (payload numbers may be floats)."""
    raw = trials_lib.trial_parameters(trial)
    return {k: params_by_id[k].cast(v) for k, v in raw.items() if k in params_by_id}


def internal_params(
    params: Mapping[str, Any], params_by_id: Mapping[str, Parameter]
) -> dict[str, Any]:
    """Parameter values as the sampler sees them (`sampler.to_internal`)."""
    return {k: to_internal(params_by_id[k], v) for k, v in params.items()}


def make_optuna_study(
    space: SearchSpace,
    trials: Sequence[Mapping[str, Any]],
    *,
    algorithm: str,
    seed: int | None,
    max_trial_count: int,
    early_stopping: EarlyStopping | None,
) -> Any:
    """An Optuna study for `space` that has learnt from the study's `trials` so far.

    Finished trials (succeeded, failed, early-stopped) are replayed; others are skipped.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner: Any = optuna.pruners.NopPruner()
    if early_stopping:
        pruner = optuna.pruners.MedianPruner(
            n_startup_trials=early_stopping.min_trials,
            n_warmup_steps=early_stopping.warmup_steps,
        )
    # A resumed study must not replay the first run's random sequence.
    effective_seed = None if seed is None else seed + len(trials)
    study = optuna.create_study(
        directions=[str(m.goal) for m in space.metrics],  # type: ignore[misc]
        sampler=make_sampler(algorithm, effective_seed, max_trial_count),
        pruner=pruner,
    )
    params_by_id = {p.parameter_id: p for p in space.all_parameters()}
    metric_ids = [m.metric_id for m in space.metrics]
    for t in trials:  # replay finished trials so the sampler learns from them
        state = trials_lib.trial_state(t)
        if state not in (TrialState.SUCCEEDED, TrialState.INFEASIBLE):
            continue
        params = internal_params(trial_params(t, params_by_id), params_by_id)
        intermediate = {
            int(m.get("stepCount", 0)): v
            for m in t.get("measurements", [])
            if (v := trials_lib.measurement_metrics(m).get(metric_ids[0])) is not None
        }
        values = [trials_lib.final_metric(t, m) for m in metric_ids]
        if (t.get(trials_lib.LOCAL_KEY) or {}).get("earlyStopped"):
            frozen_state, frozen_values = optuna.trial.TrialState.PRUNED, None
        elif (state == TrialState.SUCCEEDED or trials_lib.is_diverged(t)) and all(
            v is not None for v in values
        ):  # a diverged trial is a poor one: its worst values teach the sampler
            frozen_state, frozen_values = optuna.trial.TrialState.COMPLETE, values
        else:
            frozen_state, frozen_values = optuna.trial.TrialState.FAIL, None
        study.add_trial(
            optuna.trial.create_trial(
                state=frozen_state,
                values=frozen_values,  # type: ignore[arg-type]
                params=params,
                distributions={k: distribution(params_by_id[k]) for k in params},
                intermediate_values=intermediate,
            )
        )
    return study


def ask_new(
    study: Any, parameters: Sequence[Parameter], measured: Collection[str]
) -> tuple[Any, dict[str, Any]] | None:
    """Ask `study` for a configuration not in `measured` (`continuation.config_key`s).

    A repeat is told FAIL (TPE leaves failed trials out of its model). In a finite space
    (no double parameter) one of the configurations not measured yet is enqueued instead,
    drawn by a generator seeded with the trial count (TPE on a small discrete space keeps
    proposing its favourite); otherwise the sampler is asked again, `MAX_REPEATS` times at
    most. None when no configuration is left to measure (every point of a finite space, or
    `MAX_REPEATS` repeats in a row): a study never runs a configuration twice.
    """
    import random

    import optuna

    for _ in range(MAX_REPEATS):
        frozen = study.ask()
        params = suggest(frozen, parameters)
        if continuation.config_key(params) not in measured:
            return frozen, params
        study.tell(frozen, state=optuna.trial.TrialState.FAIL)
        try:
            points = grid_points(parameters)
        except SearchSpaceError:  # a double: a repeat is chance, ask again
            continue
        left = [p for p in points if continuation.config_key(p) not in measured]
        if not left:
            return None
        by_id = {p.parameter_id: p for p in SearchSpace(tuple(parameters)).all_parameters()}
        pick = random.Random(len(study.trials)).choice(left)
        study.enqueue_trial(internal_params(pick, by_id))
        frozen = study.ask()
        return frozen, suggest(frozen, parameters)
    return None
