"""Katib's suggestion services as their sources behave: hyperopt's `tpe` repeats configurations."""

from __future__ import annotations

import pytest

from pipelines.targets.kubeflow.katib_rules import KatibRuleError, check_experiment
from pipelines.targets.kubeflow.katib_suggestions import (
    distinct_configurations,
    hyperband_min_parallel,
    hyperband_trials,
)
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


# What Katib's own hyperband service (pkg/suggestion/v1beta1/hyperband/service.py at
# kubeflow/katib 33c8ff4, imported with grpc stubbed) proposed when driven by the controller's
# request rule, each created trial done before the next request, recorded 2026-12-01:
# (parallelTrialCount, maxTrialCount, eta, r_l) → the resource of every trial it created.
KATIB_HYPERBAND_RUNS = {
    (9, 100, 3, 9): [1] * 9,  # request 9 → 3 promotions → "unexpected trials", forever
    (9, 12, 3, 9): [1] * 9,  # request 3 → 1 promotion
    (9, 10, 3, 9): [1] * 9 + [3],  # request 1 → 1: the only promotion that passes
    (27, 100, 3, 27): [1] * 27,
    (4, 100, 2, 4): [1] * 4,
    (3, 4, 3, 3): [1, 1, 1, 3],
    (9, 13, 3, 10): [1] * 9,
    (16, 100, 2, 16): [1] * 16,
    (1, 100, 2, 1): [1],  # one bracket of one trial, then an empty reply
}


@pytest.mark.parametrize("study", sorted(KATIB_HYPERBAND_RUNS))
def test_the_hyperband_model_creates_the_trials_katibs_service_created(study):
    assert hyperband_trials(*study) == KATIB_HYPERBAND_RUNS[study]


def test_katib_hyperband_admits_no_fewer_parallel_trials_than_its_first_bracket():
    """ValidateAlgorithmSettings l.279-285: ceil(eta ** int(log(r_l) / log(eta)))."""
    assert hyperband_min_parallel(3, 9) == 9
    assert hyperband_min_parallel(3, 10) == 9
    assert hyperband_min_parallel(2, 16) == 16
    assert hyperband_min_parallel(3, 27) == 27


def test_hyperband_on_kubeflow_is_refused_with_what_katib_would_run(tmp_path):
    """A user asking for hyperband on Kubeflow learns, at compile, that Katib would stall."""
    from pipelines.compiler import compile_pipeline
    from pipelines.settings import Settings, SettingsError
    from tests.test_pipeline_spec import for_target

    settings = for_target("kubeflow", Settings(scheduler="hyperband", epochs=9, max_trials=27))
    with pytest.raises(SettingsError) as err:
        compile_pipeline("kubeflow", settings, tmp_path / "p.yaml")
    assert str(err.value) == (
        "scheduler=hyperband: Katib's hyperband (parallelTrialCount=9, eta=3, r_l=9) would "
        "run 9 of 27 trials, at epochs [1], then stall: it answers a promotion request with "
        "fewer trials than asked, which Katib's controller rejects on every retry "
        "(hyperband/service.py l.51, l.148-149; suggestionclient.go l.124-128; katib#1168); "
        "successive halving runs on the local target"
    )
    assert not (tmp_path / "p.yaml").exists()
