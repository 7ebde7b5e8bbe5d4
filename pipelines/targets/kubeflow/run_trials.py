"""The trials of an earlier Kubeflow Pipelines run, read from the Katib Experiment it ran.

A run's tune step creates an Experiment whose trial template names the run's study folder,
a folder under the pipeline root that holds the KFP run id (`<root>/<pipeline>/<run id>/...`).
The Experiment of a run is the one of hpt-pipeline's (`PART_OF` label) whose spec holds
`/<run id>/`; its Trials become Vertex Trial JSON as the tune step converts them. A study
folder the user named (`study_dir`) holds no run id: pass that run's trials file instead.
"""

from __future__ import annotations

import json
from typing import Any

from pipelines.study.search_space import SearchSpace
from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.kubeflow.katib_trials import (
    KatibTrialError,
    metric_strategies,
    to_vertex_trials,
)


def read_run(
    run_id: str, namespace: str, space: SearchSpace, api: Any = None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The run's trials (Vertex Trial JSON, read with `space`) and its (metric, goal) pairs.

    Args:
        run_id: The KFP run id.
        namespace: Where the run's Experiment is.
        space: The search space the trials' parameters are read in (today's).
        api: A `CustomObjectsApi`; default `kube.custom_objects_api()`.

    Raises:
        KatibTrialError: No Experiment of this run, or a trial outside `space`; one line.
    """
    if api is None:
        from pipelines.targets.kubeflow import kube

        api = kube.custom_objects_api()
    selector = ",".join(f"{k}={v}" for k, v in katib.PART_OF.items())
    listed = api.list_namespaced_custom_object(
        katib.GROUP, katib.VERSION, namespace, katib.EXPERIMENTS, label_selector=selector
    )
    found = [
        e
        for e in listed.get("items") or []
        if f"/{run_id}/" in json.dumps(e.get("spec") or {}, separators=(",", ":"))
    ]
    if not found:
        raise KatibTrialError(
            f"no Katib Experiment of run {run_id} in namespace {namespace} (a run with its own "
            "study_dir names no run id: pass its trials file)"
        )
    experiment = found[0]
    name = experiment["metadata"]["name"]
    trials = api.list_namespaced_custom_object(
        katib.GROUP,
        katib.VERSION,
        namespace,
        katib.TRIALS,
        label_selector=f"{katib.EXPERIMENT_LABEL}={name}",
    )
    strategies = metric_strategies(experiment)
    objective = experiment["spec"]["objective"]
    objectives = [(objective["objectiveMetricName"], objective["type"])] + [
        (metric, "maximize" if strategies.get(metric) == "max" else "minimize")
        for metric in objective.get("additionalMetricNames") or []
    ]
    return to_vertex_trials(trials.get("items") or [], space, strategies), objectives
