"""Katib's suggestion services as their sources behave: hyperopt's `tpe` repeats configurations."""

from __future__ import annotations

import pytest

from pipelines.targets.kubeflow.katib_rules import KatibRuleError, check_experiment
from pipelines.targets.kubeflow.katib_suggestions import distinct_configurations
from tests.test_kubeflow_katib import build


def test_hyperopt_tpe_gives_one_configuration_per_request_after_the_first():
    """base_service.py l.303-311: one seed, the same trials, `tpe.suggest` in a loop."""
    assert distinct_configurations("tpe", 3, first_request=True) == 3  # random start-up
    assert distinct_configurations("tpe", 3, first_request=False) == 1
    assert distinct_configurations("tpe", 1, first_request=False) == 1  # nothing to repeat
    for algorithm in ("multivariate-tpe", "random", "grid"):  # study.ask / one rand.suggest
        assert distinct_configurations(algorithm, 3, first_request=False) == 3


def test_the_default_algorithm_runs_as_optunas_multivariate_tpe_with_parallel_trials():
    """Vertex's default algorithm, three trials at a time: Katib runs distinct configurations."""
    exp = build(parallel_trial_count=3)
    assert exp["spec"]["algorithm"] == {"algorithmName": "multivariate-tpe"}
    assert exp["spec"]["parallelTrialCount"] == 3
    check_experiment(exp)


def test_hyperopt_tpe_with_parallel_trials_is_refused_in_one_line():
    exp = build(parallel_trial_count=3)
    exp["spec"]["algorithm"] = {"algorithmName": "tpe"}
    with pytest.raises(KatibRuleError) as err:
        check_experiment(exp)
    assert str(err.value) == (
        "spec.algorithm.algorithmName='tpe': with spec.parallelTrialCount=3, Katib's tpe "
        "service proposes one configuration for every trial of a request after the first "
        "(run time: hyperopt base_service.py l.303-311, katib#1329); use multivariate-tpe"
    )
    exp["spec"]["parallelTrialCount"] = 1  # one trial per request: nothing repeats
    check_experiment(exp)


def test_katibs_parallel_default_counts_when_the_field_is_absent():
    exp = build(parallel_trial_count=1)
    exp["spec"]["algorithm"] = {"algorithmName": "tpe"}
    del exp["spec"]["parallelTrialCount"]  # Katib defaults it to 3
    with pytest.raises(KatibRuleError, match="parallelTrialCount=3"):
        check_experiment(exp)
