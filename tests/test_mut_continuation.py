"""Continuing a study: the whole refusal line, trials without parameters, order-free configs.

Written to kill mutmut's survivors in `pipelines/study/continuation.py` (docs/mutation.md).
"""

from __future__ import annotations

import optuna
import pytest

from pipelines.study import continuation, optuna_study
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from tests.test_continuation import DEFAULTS, FOUR, SPACE, TODAY, earlier


def test_two_objectives_that_differ_are_listed_whole_in_the_refusal():
    mine = [("val_accuracy", "maximize"), ("latency_ms", "minimize")]
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(FOUR, mine), SPACE, TODAY, DEFAULTS)
    assert str(err.value) == (
        "continue_from=runs/first: its objectives (val_accuracy maximize, latency_ms minimize) "
        "differ from today's (val_accuracy maximize); a study continues only with the same "
        "metrics and goals"
    )


def test_an_earlier_trial_written_without_parameters_joins_the_cloud_artifact():
    # Vertex's Trial JSON leaves an empty list out: a trial that never got parameters.
    bare = {
        k: v
        for k, v in tl.make_trial("first:9", {}, state=TrialState.INFEASIBLE).items()
        if k != "parameters"
    }
    own = [
        tl.make_trial("1", {"learning_rate": 0.01, "num_units": 128.0}, state=TrialState.SUCCEEDED)
    ]
    combined = continuation.combine([bare, *own], own)
    assert [t["id"] for t in combined] == ["first:9", "1"]
    assert combined[0]["parameters"] == []


def test_a_configuration_measured_earlier_is_skipped_whatever_order_its_parameters_came_in():
    tiny = SearchSpace(
        parameters=(
            Parameter("a", "categorical", values=("x", "y")),
            Parameter("b", "discrete", values=(1, 2)),
        )
    )
    # The earlier run wrote its parameters b first; today's sampler proposes a first.
    measured = {
        continuation.config_key(c)
        for c in ({"b": 1, "a": "x"}, {"b": 2, "a": "x"}, {"b": 1, "a": "y"})
    }
    for seed in range(5):
        created = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        _, params = optuna_study.ask_new(created, tiny.parameters, measured)
        assert params == {"a": "y", "b": 2}
