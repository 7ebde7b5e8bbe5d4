"""How the local study searches: Vertex's search-space semantics mapped onto Optuna.

Vertex's algorithms map to Optuna's (TPE for `ALGORITHM_UNSPECIFIED`, random, grid), with
log, reverse-log, discrete and conditional parameters sampled as Vertex means them. So that
a short study still tries every value a user listed, the first `max(TPE's start-up,
largest value set)` trials draw each categorical (and discrete) parameter from its
least-used values (ties by the seeded generator) and the others at random; only then does
TPE model the results. With 4 trials over 64/128/256 units, trials 1-3 use each value once;
the same seed gives the same trials. The rules in full: docs/local-run.md, "The local run, in
detail" (Study start-up) and "The local study and executor, as Vertex behaves".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from pipelines.study.search_space import Parameter, SearchSpaceError

MAX_GRID_POINTS = 100_000


def distribution(p: Parameter) -> Any:
    """The Optuna distribution of `p`'s internal value (see `to_external` for reverse_log)."""
    import optuna

    log = p.scale in ("log", "reverse_log")
    if p.type == "double":
        return optuna.distributions.FloatDistribution(float(p.min), float(p.max), log=log)  # type: ignore[arg-type]
    if p.type == "integer":
        return optuna.distributions.IntDistribution(int(p.min), int(p.max), log=log)  # type: ignore[arg-type]
    return optuna.distributions.CategoricalDistribution(list(p.values))


def to_external(p: Parameter, internal: Any) -> Any:
    """Sampler value → trial value (`reverse_log`: reflected, min + max - y)."""
    if p.scale == "reverse_log" and p.type in ("double", "integer"):
        assert p.min is not None and p.max is not None
        reflected = min(max(p.min + p.max - float(internal), p.min), p.max)  # clamp rounding
        return int(round(reflected)) if p.type == "integer" else float(reflected)
    return p.cast(internal)


def to_internal(p: Parameter, external: Any) -> Any:
    """Trial value → sampler value (the inverse of `to_external`)."""
    return to_external(p, external) if p.scale == "reverse_log" else p.cast(external)


def suggest(trial: Any, parameters: Sequence[Parameter]) -> dict[str, Any]:
    """Ask an Optuna trial for values of `parameters` and their active conditional children."""
    import optuna

    values: dict[str, Any] = {}
    for p in parameters:
        d = distribution(p)
        if isinstance(d, optuna.distributions.FloatDistribution):
            internal = trial.suggest_float(p.parameter_id, d.low, d.high, log=d.log)
        elif isinstance(d, optuna.distributions.IntDistribution):
            internal = trial.suggest_int(p.parameter_id, d.low, d.high, log=d.log)
        else:
            internal = trial.suggest_categorical(p.parameter_id, d.choices)
        values[p.parameter_id] = to_external(p, internal)
        values.update(suggest(trial, p.active_children(values[p.parameter_id])))
    return values


def grid_points(parameters: Sequence[Parameter]) -> list[dict[str, Any]]:
    """Every grid point (conditional children expanded only where active), in order."""

    def expand(params: Sequence[Parameter]) -> Iterator[dict[str, Any]]:
        if not params:
            yield {}
            return
        head, rest = params[0], params[1:]
        for value in head.feasible_values():
            for below in expand(head.active_children(value)):
                for others in expand(rest):
                    yield {head.parameter_id: head.cast(value), **below, **others}

    points = list(itertools.islice(expand(parameters), MAX_GRID_POINTS + 1))
    if len(points) > MAX_GRID_POINTS:
        raise SearchSpaceError(f"grid search: more than {MAX_GRID_POINTS} grid points")
    return points


def make_sampler(algorithm: str, seed: int | None, max_trial_count: int) -> Any:
    """The Optuna sampler for a Vertex `study_spec_algorithm` (grid points are enqueued).

    TPE and random search start with the covering start-up (see the module docstring).
    """
    import optuna

    if algorithm == "ALGORITHM_UNSPECIFIED":
        startup = max(2, min(10, max_trial_count // 3))
        tpe = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)
        return _covering_start(tpe, startup, seed)
    return _covering_start(optuna.samplers.RandomSampler(seed=seed), 0, seed)


def _least_used(choices: Sequence[Any], used: Sequence[Any], rng: Any) -> Any:
    """One of `choices` given least often in `used` (ties: the seeded `rng` decides)."""
    counts = [sum(1 for u in used if u == c) for c in choices]
    fewest = [c for c, n in zip(choices, counts, strict=True) if n == min(counts)]
    return fewest[int(rng.randint(len(fewest)))]


def _categorical_sizes(study: Any) -> list[int]:
    """How many choices each categorical parameter of `study`'s past trials had."""
    import optuna

    return [
        len(d.choices)
        for past in study.get_trials(deepcopy=False)
        for d in past.distributions.values()
        if isinstance(d, optuna.distributions.CategoricalDistribution)
    ]


def _values_given(study: Any, trial: Any, name: str) -> list[Any]:
    """The values parameter `name` took in `study`'s trials other than `trial`."""
    return [
        t.params[name]
        for t in study.get_trials(deepcopy=False)
        if t.number != trial.number and name in t.params
    ]


def _covering_start(base: Any, startup: int, seed: int | None) -> Any:
    """`base` behind a start-up that gives every categorical value a trial early.

    Trials numbered below `max(startup, largest categorical set seen)` sample
    categorical parameters by `_least_used` and the others at random; later trials
    are `base`'s.
    """
    import numpy as np
    import optuna

    class CoveringStart(optuna.samplers.BaseSampler):
        def __init__(self) -> None:
            self.base = base
            # One random stream: a random-search base must not replay the start-up's draws.
            random_base = isinstance(base, optuna.samplers.RandomSampler)
            self.random = base if random_base else optuna.samplers.RandomSampler(seed=seed)
            self.rng = np.random.RandomState(seed)

        def _in_startup(self, study: Any, trial: Any, extra: Any = None) -> bool:
            sizes = [len(extra.choices)] if extra is not None else []
            return bool(trial.number < max([startup, *sizes, *_categorical_sizes(study)]))

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return dict(self.base.infer_relative_search_space(study, trial))

        def sample_relative(self, study: Any, trial: Any, search_space: Any) -> dict[str, Any]:
            if self._in_startup(study, trial):
                return {}
            return dict(self.base.sample_relative(study, trial, search_space))

        def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
            categorical = isinstance(dist, optuna.distributions.CategoricalDistribution)
            if not self._in_startup(study, trial, dist if categorical else None):
                return self.base.sample_independent(study, trial, name, dist)
            if not categorical:
                return self.random.sample_independent(study, trial, name, dist)
            return _least_used(dist.choices, _values_given(study, trial, name), self.rng)

        def before_trial(self, study: Any, trial: Any) -> None:
            self.base.before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            self.base.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:
            self.base.reseed_rng()
            if self.random is not self.base:
                self.random.reseed_rng()
            self.rng.seed()

    return CoveringStart()
