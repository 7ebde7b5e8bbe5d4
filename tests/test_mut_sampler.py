"""What the local study proposes: log integers, the grid's limit, the start-up's length, no replays.

Written to kill mutmut's survivors in `pipelines/study/sampler.py` (docs/mutation.md), each
at the level a user meets it: the trials a local study proposes.
"""

from __future__ import annotations

import statistics

import optuna
import pytest

from pipelines.study import sampler
from pipelines.study.search_space import Parameter, SearchSpaceError

optuna.logging.set_verbosity(optuna.logging.WARNING)
DOUBLES = (
    Parameter("learning_rate", "double", min=1e-4, max=1.0, scale="log"),
    Parameter("momentum", "double", min=0.0, max=0.9, scale="linear"),
)


def proposals(optuna_sampler, n: int, parameters=DOUBLES) -> list[dict]:
    """`n` trials of a study, each told a score that prefers a learning rate near 0.01."""
    study = optuna.create_study(direction="maximize", sampler=optuna_sampler)
    out = []
    for _ in range(n):
        trial = study.ask()
        params = sampler.suggest(trial, parameters)
        study.tell(trial, -abs(params.get("learning_rate", 0) - 0.01))
        out.append(params)
    return out


def test_a_log_integer_is_drawn_log_uniformly():
    width = Parameter("width", "integer", min=1, max=1024, scale="log")
    widths = [
        p["width"] for p in proposals(sampler.make_sampler("RANDOM_SEARCH", 0, 400), 400, (width,))
    ]
    assert all(type(w) is int and 1 <= w <= 1024 for w in widths)
    # log-uniform over [1, 1024]: median near 32; uniform would put it near 512
    assert statistics.median(widths) < 128


def test_a_grid_of_the_largest_size_runs_whole_and_one_point_more_is_refused():
    grid = (Parameter("a", "integer", min=1, max=1000), Parameter("b", "integer", min=1, max=100))
    assert len(sampler.grid_points(grid)) == sampler.MAX_GRID_POINTS == 100_000
    bigger = (grid[0], Parameter("b", "integer", min=1, max=101))
    with pytest.raises(SearchSpaceError) as err:
        sampler.grid_points(bigger)
    assert str(err.value) == "grid search: more than 100000 grid points"


@pytest.mark.parametrize(("budget", "random_trials"), [(6, 2), (7, 2), (12, 4), (45, 10)])
def test_tpe_takes_over_after_max_2_min_10_a_third_of_the_budget_random_trials(
    budget, random_trials
):
    tuned = proposals(sampler.make_sampler("ALGORITHM_UNSPECIFIED", 3, budget), budget)
    plain = proposals(optuna.samplers.RandomSampler(seed=3), budget)
    same = next((i for i, (a, b) in enumerate(zip(tuned, plain, strict=True)) if a != b), budget)
    assert same == random_trials


@pytest.mark.parametrize("algorithm", ["ALGORITHM_UNSPECIFIED", "RANDOM_SEARCH"])
@pytest.mark.parametrize("categorical", [True, False], ids=["with_categorical", "numbers_only"])
def test_no_trial_replays_an_earlier_trials_draws(algorithm, categorical):
    optimizer = Parameter("optimizer", "categorical", values=("sgd", "adam", "rmsprop"))
    space = (*DOUBLES, optimizer) if categorical else DOUBLES
    trials = proposals(sampler.make_sampler(algorithm, 3, 12), 12, space)
    rates = [t["learning_rate"] for t in trials]
    assert len(set(rates)) == len(rates), rates


def test_a_reverse_log_integer_crowds_at_its_top_and_stays_an_integer():
    units = Parameter("units", "integer", min=1, max=1000, scale="reverse_log")
    drawn = proposals(sampler.make_sampler("RANDOM_SEARCH", 0, 300), 300, (units,))
    values = [p["units"] for p in drawn]
    assert all(type(v) is int and 1 <= v <= 1000 for v in values)
    assert statistics.median(values) > 900  # reflected log-uniform: the top is dense
