"""How the local study searches: Vertex's search-space semantics mapped onto Optuna.

`ALGORITHM_UNSPECIFIED` (Vertex: Bayesian optimisation) → Optuna TPE;
`RANDOM_SEARCH` → random; `GRID_SEARCH` → every grid point once, in order.
Doubles and integers on a log scale are sampled in log space; `reverse_log`
is sampled as `min + max - y` with `y` log-uniform on `[min, max]`, so samples
crowd towards `max`. Discrete values are a categorical choice for the sampler.
Conditional parameters are suggested only when their parent takes one of their
`parent_values`.
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
    """The Optuna sampler for a Vertex `study_spec_algorithm` (grid points are enqueued)."""
    import optuna

    if algorithm == "ALGORITHM_UNSPECIFIED":
        startup = max(2, min(10, max_trial_count // 3))
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)
    return optuna.samplers.RandomSampler(seed=seed)
