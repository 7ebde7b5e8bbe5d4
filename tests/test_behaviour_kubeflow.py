"""Kubeflow: fakes held to the real client's signatures, Katib's counts, names stable per folder."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from unittest import mock

import pytest
from model_registry import ModelRegistry

from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.kubeflow import model_registry, trainjob
from pipelines.targets.kubeflow.katib_rules import KatibRuleError, check_experiment
from tests.conftest import python_stdout
from tests.test_kubeflow_katib import build


def registry_client() -> mock.MagicMock:
    """`model_registry.ModelRegistry` autospecced: a misspelt keyword fails as on a cluster."""
    factory = mock.create_autospec(ModelRegistry)
    factory.return_value.register_model.return_value = SimpleNamespace(id="17")
    return factory


def test_registration_calls_the_real_model_registry_signatures():
    factory = registry_client()
    ids = model_registry.register_version(
        url="https://registry.kubeflow.svc:8443",
        name="hpt-cnn",
        uri="/mnt/hpt/run-7/model",
        version="run-7",
        metrics={"test_accuracy": 0.97},
        lineage={"best_trial_id": "3"},
        client_factory=factory,
    )
    assert ids == {"registered_model_id": "17", "version": "run-7"}
    (init,) = factory.call_args_list
    bound = inspect.signature(ModelRegistry).bind(*init.args, **init.kwargs).arguments
    assert (bound["server_address"], bound["port"], bound["author"], bound["is_secure"]) == (
        "https://registry.kubeflow.svc",
        8443,
        "hpt-pipeline",
        True,
    )
    (call,) = factory.return_value.register_model.call_args_list
    bound = inspect.signature(ModelRegistry.register_model).bind(None, *call.args, **call.kwargs)
    sent = bound.arguments
    assert (sent["name"], sent["uri"], sent["version"]) == (
        "hpt-cnn",
        "/mnt/hpt/run-7/model",
        "run-7",
    )
    assert (sent["model_format_name"], sent["model_format_version"]) == ("tensorflow", "2")
    assert sent["metadata"] == {"test_accuracy": 0.97, "best_trial_id": "3"}


def test_the_autospecced_registry_refuses_a_misspelt_keyword():
    """The fake above would catch a renamed keyword: the check is not vacuous."""
    client = registry_client()("https://mr", 443, author="a", is_secure=True)
    with pytest.raises(TypeError):
        client.register_model("m", "/u", model_format="tensorflow", version="1")


@pytest.mark.parametrize("max_trials", [1, 2, 3])
def test_small_studies_with_the_whole_budget_allowed_to_fail_pass_katibs_rules(max_trials):
    """maxFailedTrialCount may equal maxTrialCount (Katib refuses only greater)."""
    exp = build(max_trial_count=max_trials, parallel_trial_count=1, max_failed_trial_count=3)
    assert exp["spec"]["maxFailedTrialCount"] == exp["spec"]["maxTrialCount"] == max_trials
    check_experiment(exp)
    exp["spec"]["maxFailedTrialCount"] = max_trials + 1
    with pytest.raises(KatibRuleError, match="should be less than or equal to spec.maxTrialCount"):
        check_experiment(exp)


NAMERS = {"experiment": katib.experiment_name, "tfjob": trainjob.trainjob_name}
NAMER_CODE = {
    "experiment": "from pipelines.targets.kubeflow.experiment import experiment_name as f",
    "tfjob": "from pipelines.targets.kubeflow.trainjob import trainjob_name as f",
}


@pytest.mark.parametrize("kind", sorted(NAMERS))
def test_names_differ_per_folder_and_are_the_same_in_a_fresh_process(kind):
    """A retried step finds its Experiment / TFJob again; two runs never share one."""
    name = NAMERS[kind]
    folders = ["/mnt/hpt/runs/r1/study", "/mnt/hpt/runs/r2/study", "gs://b/runs/r1/study"]
    here = [name("HPT pipeline", folder) for folder in folders]
    assert len(set(here)) == len(folders)
    code = f"{NAMER_CODE[kind]}\nfor d in {folders!r}:\n    print(f('HPT pipeline', d))"
    assert python_stdout(code).split() == here
