"""The Katib half of the kubeflow target: Experiment, webhook rules, Trials, the tune component.

No cluster: the Kubernetes API (CustomObjectsApi) is the only thing replaced. The last
tests run a Katib Experiment's trial template through the local executors, substituting
`${trialParameters.*}` and wrapping the command the way Katib does, and read the metrics
file the way Katib's File collector (JSON) does.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipelines.jobs import local_job, worker_pools
from pipelines.study import trials as trials_lib
from pipelines.study.search_space import Metric, Parameter, SearchSpace, default_search_space
from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.kubeflow import katib_trials, katib_tune, kube
from pipelines.targets.kubeflow.katib_rules import KatibRuleError, check_experiment
from pipelines.targets.kubeflow.trial_template import TrialPods
from pipelines.targets.kubeflow.waiting import KubeflowJobError
from tests import fake_trainer, katib_controller
from tests.fake_kube import Cluster, HeldCustomObjects, call_with_request

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "ghcr.io/acme/hpt-trainer:v1"


def as_kfp_renders(value: Any) -> Any:
    """What a component receives for a list parameter: JSON, numbers as doubles."""
    return json.loads(json.dumps(value), parse_int=float)


def mixed_space() -> SearchSpace:
    return SearchSpace(
        parameters=(
            Parameter("learning_rate", "double", min=1e-4, max=0.1, scale="log"),
            Parameter("momentum", "double", min=0.5, max=0.99, scale="linear"),
            Parameter("num_units", "integer", min=16, max=256, scale="log"),
            Parameter("batch_size", "discrete", values=(32, 64, 128)),
            Parameter("optimizer", "categorical", values=("sgd", "adam")),
        ),
        metrics=(Metric("val_accuracy", "maximize"), Metric("val_loss", "minimize")),
    )


def pools(workers: int = 0, **overrides: Any) -> list[dict[str, Any]]:
    """The trial job spec's pools: a chief and `workers` (`trial_workers`)."""
    options: dict[str, Any] = dict(
        image_uri=IMAGE,
        command=["python", "-m", "trainer.task"],
        args=["--data=/mnt/hpt/data/prepared", "--epochs=4", "--metric_tag=val_accuracy"],
        machine_type="n1-standard-8",
        worker_count=workers,
    )
    options.update(overrides)
    return worker_pools.training_worker_pool_specs(**options)


def study(space: SearchSpace | None = None, **overrides: Any) -> dict[str, Any]:
    space = space or default_search_space()
    values: dict[str, Any] = dict(
        study_spec_parameters=as_kfp_renders(space.to_study_spec_parameters()),
        study_spec_metrics=as_kfp_renders(space.to_study_spec_metrics()),
        study_spec_algorithm="ALGORITHM_UNSPECIFIED",
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
        max_trial_count=8.0,
        parallel_trial_count=2.0,
        max_failed_trial_count=2.0,
        worker_pool_specs=as_kfp_renders(pools()),
    )
    values.update(overrides)
    return values


def build(space: SearchSpace | None = None, **overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = dict(name="hpt-study", namespace="team", cpu="2", memory="8Gi")
    if "nodes" in overrides and "worker_pool_specs" not in overrides:  # trial_workers + 1
        overrides["worker_pool_specs"] = as_kfp_renders(pools(int(overrides["nodes"]) - 1))
    options.update(
        study(
            space,
            **{
                k: v
                for k, v in overrides.items()
                if k.startswith(("study_", "max_", "parallel_", "worker_"))
            },
        )
    )
    options.update(
        {
            k: v
            for k, v in overrides.items()
            if not k.startswith(("study_", "max_", "parallel_", "worker_"))
        }
    )
    study_fields = {f.name for f in dataclasses.fields(katib.StudyPayload)}
    pod_fields = {f.name for f in dataclasses.fields(TrialPods)}
    return katib.build_experiment(
        name=options.pop("name"),
        namespace=options.pop("namespace"),
        study=katib.StudyPayload(**{k: options.pop(k) for k in study_fields & set(options)}),
        pods=TrialPods(**{k: options.pop(k) for k in pod_fields & set(options)}),
        **options,
    )


def container(exp: dict[str, Any]) -> dict[str, Any]:
    return exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]


# --- the Experiment ------------------------------------------------------------------------------


def test_experiment_round_trips_through_katib_models_and_the_api_client() -> None:
    from kubeflow_katib_api.models import V1beta1Experiment
    from kubernetes.client import ApiClient

    exp = build(mixed_space(), early_stopping=True, service_account="hpt-runner")
    model = V1beta1Experiment.from_dict(exp)
    assert model is not None and model.spec is not None
    assert ApiClient().sanitize_for_serialization(model.to_dict()) == exp
    assert katib.round_trip(exp) == exp
    spec = model.spec
    assert (model.api_version, model.kind) == ("kubeflow.org/v1beta1", "Experiment")
    assert spec.algorithm.algorithm_name == "multivariate-tpe"  # type: ignore[union-attr]
    assert spec.early_stopping.algorithm_name == "medianstop"  # type: ignore[union-attr]
    assert {s.name: s.value for s in spec.early_stopping.algorithm_settings} == {  # type: ignore[union-attr]
        "min_trials_required": "3",
        "start_step": "1",
    }
    assert spec.resume_policy == "FromVolume"
    assert (spec.max_trial_count, spec.parallel_trial_count, spec.max_failed_trial_count) == (
        8,
        2,
        2,
    )
    objective = spec.objective
    assert objective.type == "maximize" and objective.objective_metric_name == "val_accuracy"  # type: ignore[union-attr]
    assert objective.additional_metric_names == ["val_loss"]  # type: ignore[union-attr]
    assert [(s.name, s.value) for s in objective.metric_strategies] == [
        ("val_accuracy", "max"),
        ("val_loss", "min"),
    ]  # type: ignore[union-attr]
    params = {p.name: (p.parameter_type, p.feasible_space.to_dict()) for p in spec.parameters}  # type: ignore[union-attr]
    assert params == {
        "learning_rate": ("double", {"min": "0.0001", "max": "0.1", "distribution": "logUniform"}),
        "momentum": ("double", {"min": "0.5", "max": "0.99", "distribution": "uniform"}),
        "num_units": ("int", {"min": "16", "max": "256", "distribution": "logUniform"}),
        "batch_size": ("discrete", {"list": ["32", "64", "128"]}),
        "optimizer": ("categorical", {"list": ["sgd", "adam"]}),
    }
    collector = spec.metrics_collector_spec
    assert collector.collector.kind == "File"  # type: ignore[union-attr]
    assert collector.source.file_system_path.to_dict() == {  # type: ignore[union-attr]
        "path": "/tmp/hypertune/output.metrics",
        "kind": "File",
        "format": "JSON",
    }
    assert exp["metadata"]["annotations"][katib.SPEC_HASH_ANNOTATION] == katib.spec_hash(exp)


def test_trial_template_runs_the_trial_pool_with_vertex_style_flags() -> None:
    exp = build(
        worker_pool_specs=as_kfp_renders(
            pools(accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2)
        ),
        service_account="hpt-runner",
        pvc_name="hpt-data",
        data_mount_path="/mnt/hpt",
        base_output_directory="/mnt/hpt/runs/r1/study",
    )
    template = exp["spec"]["trialTemplate"]
    assert template["primaryContainerName"] == "training-container"
    assert (
        template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    )
    assert template["trialParameters"] == [
        {"name": "learning_rate", "reference": "learning_rate", "description": "--learning_rate"},
        {"name": "momentum", "reference": "momentum", "description": "--momentum"},
        {"name": "num_units", "reference": "num_units", "description": "--num_units"},
        {"name": "trialName", "reference": "${trialSpec.Name}", "description": "CLOUD_ML_TRIAL_ID"},
    ]
    job = template["trialSpec"]
    assert (job["apiVersion"], job["kind"], job["spec"]["backoffLimit"]) == ("batch/v1", "Job", 0)
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "hpt-runner"
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "hpt-data"}}]
    c = container(exp)
    assert c["name"] == "training-container" and c["image"] == IMAGE
    assert c["command"] == ["python", "-m", "trainer.task"]
    assert c["args"] == [
        "--data=/mnt/hpt/data/prepared",
        "--epochs=4",
        "--metric_tag=val_accuracy",
        "--learning_rate=${trialParameters.learning_rate}",
        "--momentum=${trialParameters.momentum}",
        "--num_units=${trialParameters.num_units}",
    ]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env == {
        "CLOUD_ML_HP_METRIC_FILE": "/tmp/hypertune/output.metrics",
        "CLOUD_ML_TRIAL_ID": "${trialParameters.trialName}",
        "AIP_MODEL_DIR": "/mnt/hpt/runs/r1/study/${trialParameters.trialName}/model/",
        "AIP_CHECKPOINT_DIR": "/mnt/hpt/runs/r1/study/${trialParameters.trialName}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "/mnt/hpt/runs/r1/study/${trialParameters.trialName}/logs/",
    }
    amounts = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "2"}
    assert c["resources"] == {"requests": amounts, "limits": amounts}
    assert c["volumeMounts"] == [{"name": "data", "mountPath": "/mnt/hpt"}]


@pytest.mark.parametrize("metric, goal", [("val_loss", "minimize"), ("val_accuracy", "maximize")])
def test_the_experiment_optimizes_toward_the_primary_metrics_goal(metric: str, goal: str) -> None:
    """A val_loss study that Katib maximised would pick the worst trial as the best."""
    space = SearchSpace(
        parameters=(Parameter("learning_rate", "double", min=1e-4, max=0.1, scale="log"),),
        metrics=(Metric(metric, goal),),
    )
    objective = build(space)["spec"]["objective"]
    assert (objective["type"], objective["objectiveMetricName"]) == (goal, metric)
    assert objective["metricStrategies"] == [{"name": metric, "value": goal[:3]}]


def test_algorithms_counts_and_selection_are_mapped() -> None:
    grid_space = SearchSpace(
        parameters=(
            Parameter("num_units", "integer", min=1, max=3),
            Parameter("batch_size", "discrete", values=(32, 64)),
        )
    )
    grid = build(
        grid_space,
        study_spec_algorithm="GRID_SEARCH",
        max_trial_count=50.0,
        parallel_trial_count=10.0,
    )
    assert grid["spec"]["algorithm"] == {"algorithmName": "grid"}
    # Katib's grid refuses maxTrialCount above the 3 x 2 combinations: capped, as Vertex ends there.
    assert (grid["spec"]["maxTrialCount"], grid["spec"]["parallelTrialCount"]) == (6, 6)
    assert build(study_spec_algorithm="RANDOM_SEARCH")["spec"]["algorithm"] == {
        "algorithmName": "random"
    }
    last = build(study_spec_measurement_selection_type="LAST_MEASUREMENT")
    assert last["spec"]["objective"]["metricStrategies"] == [
        {"name": "val_accuracy", "value": "latest"}
    ]
    # Vertex's 0 ("the service decides") → the local stand-in's floor of 3 failures.
    assert build(max_failed_trial_count=0.0)["spec"]["maxFailedTrialCount"] == 3
    assert "earlyStopping" not in build()["spec"]
    assert katib.experiment_name("HPT Pipeline!", "/mnt/hpt/runs/r1") == katib.experiment_name(
        "HPT Pipeline!", "/mnt/hpt/runs/r1"
    )
    name = katib.experiment_name("9 " + "x" * 80, "s3://b/runs/r2")
    assert len(name) <= 40 and name[0].isalpha() and "-hpt-" in name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            dict(
                space=SearchSpace(
                    parameters=(
                        Parameter("momentum", "double", min=0.5, max=0.99, scale="reverse_log"),
                    )
                )
            ),
            "parameter 'momentum': scale reverse_log has no Katib distribution",
        ),
        (
            dict(
                space=SearchSpace(
                    parameters=(
                        Parameter(
                            "optimizer",
                            "categorical",
                            values=("sgd", "adam"),
                            conditional=(
                                Parameter(
                                    "momentum", "double", min=0.1, max=0.9, parent_values=("sgd",)
                                ),
                            ),
                        ),
                    )
                )
            ),
            "parameter 'optimizer': conditional parameters are not supported by Katib",
        ),
        (
            dict(study_spec_algorithm="NELDER_MEAD"),
            "study_spec_algorithm='NELDER_MEAD': expected one of",
        ),
        (dict(name="HPT_Study"), "experiment name 'HPT_Study'"),
        (
            dict(worker_pool_specs=as_kfp_renders(pools(args=["--data=/mnt/my data"]))),
            "trial command word '--data=/mnt/my data': Katib's pod webhook runs the trial "
            "command through `sh -c`",
        ),
        (
            dict(
                worker_pool_specs=as_kfp_renders(
                    pools(accelerator_type="TPU_V3", accelerator_count=8)
                )
            ),
            "accelerator_type='TPU_V3': the kubeflow target requests NVIDIA GPUs",
        ),
        (
            dict(worker_pool_specs=[{**pools()[0], "replica_count": 2}]),
            "worker_pool_specs: 2 replicas, expected 1; a Katib trial here runs one pod",
        ),
        (
            dict(worker_pool_specs=[{**pools()[0], "container_spec": {"image_uri": IMAGE}}]),
            "worker_pool_specs[0].container_spec: needs image_uri and command",
        ),
        (
            dict(pvc_name="data", data_mount_path="mnt"),
            "data_mount_path='mnt': expected an absolute path",
        ),
    ],
)
def test_what_katib_cannot_run_is_refused_in_one_line(change: dict[str, Any], message: str) -> None:
    # Not `change.pop`: the parameter is shared by every run of this test in the process.
    space = change.get("space")
    with pytest.raises(ValueError) as err:
        build(space, **{k: v for k, v in change.items() if k != "space"})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# --- Katib's admission rules ---------------------------------------------------------------------


def test_built_experiments_pass_the_webhook_rules() -> None:
    check_experiment(build())
    check_experiment(build(mixed_space(), early_stopping=True, pvc_name="d", data_mount_path="/d"))


def test_grid_experiments_respect_the_grid_services_rules() -> None:
    space = SearchSpace(
        parameters=(
            Parameter("num_units", "integer", min=1, max=3),
            Parameter("batch_size", "discrete", values=(32, 64)),
        )
    )
    grid = build(space, study_spec_algorithm="GRID_SEARCH", max_trial_count=6.0)
    check_experiment(grid)
    grid["spec"]["maxTrialCount"] = 7
    with pytest.raises(KatibRuleError, match=r"maxTrialCount=7: grid: .* combinations: 6"):
        check_experiment(grid)
    grid["spec"]["maxTrialCount"] = 6
    grid["spec"]["parameters"][0] = {
        "name": "num_units",
        "parameterType": "double",
        "feasibleSpace": {"min": "1", "max": "3"},
    }
    with pytest.raises(KatibRuleError, match="grid: parameter num_units step is nil"):
        check_experiment(grid)


def _set(path: str, value: Any) -> Any:
    def change(exp: dict[str, Any]) -> None:
        keys = path.split(".")
        target = exp
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if value is DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return change


DELETE = object()


def unbind_num_units(exp: dict[str, Any]) -> None:
    """A parameter no trial parameter references (its flag dropped from the template too)."""
    template = exp["spec"]["trialTemplate"]
    template["trialParameters"] = [
        p for p in template["trialParameters"] if p["name"] != "num_units"
    ]
    c = template["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [a for a in c["args"] if not a.startswith("--num_units=")]


T = "spec.trialTemplate"
MC = "spec.metricsCollectorSpec"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set("metadata.name", "Hpt"), "metadata.name='Hpt': must consist of lower case"),
        (_set("metadata.name", "h" * 41), "at most 40 characters"),
        (
            _set("spec.maxFailedTrialCount", -1),
            "spec.maxFailedTrialCount=-1: should not be less than 0",
        ),
        (_set("spec.maxTrialCount", 0), "spec.maxTrialCount=0: must be greater than 0"),
        (_set("spec.parallelTrialCount", 0), "spec.parallelTrialCount=0: must be greater than 0"),
        (
            _set("spec.maxFailedTrialCount", 9),
            "spec.maxFailedTrialCount=9: should be less than or equal to spec.maxTrialCount",
        ),
        (
            _set("spec.parallelTrialCount", 9),
            "spec.parallelTrialCount=9: should be less than or equal to spec.maxTrialCount",
        ),
        (_set("spec.objective", DELETE), "spec.objective: must be specified"),
        (
            _set("spec.objective.type", "maximise"),
            "spec.objective.type='maximise': must be minimize or maximize",
        ),
        (
            _set("spec.objective.objectiveMetricName", ""),
            "spec.objective.objectiveMetricName: must be specified",
        ),
        (
            _set("spec.objective.additionalMetricNames", ["val_accuracy"]),
            "should not contain spec.objective.objectiveMetricName",
        ),
        (
            _set("spec.algorithm.algorithmName", "bayesian"),
            "spec.algorithm.algorithmName='bayesian': unable to get Suggestion config data",
        ),
        (_set("spec.algorithm", DELETE), "spec.algorithm: must be specified"),
        (
            _set("spec.earlyStopping", {"algorithmName": "hyperband"}),
            "spec.earlyStopping.algorithmName='hyperband'",
        ),
        (
            _set("spec.resumePolicy", "Sometimes"),
            "spec.resumePolicy='Sometimes': invalid ResumePolicyType",
        ),
        (_set(f"{T}.primaryContainerName", ""), f"{T}.primaryContainerName: must be specified"),
        (
            _set(f"{T}.successCondition", DELETE),
            "successCondition and failureCondition must be specified",
        ),
        (_set(f"{T}.trialParameters", DELETE), f"{T}.trialParameters: must be specified"),
        (
            _set(f"{T}.trialSpec", DELETE),
            "spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified",
        ),
        (
            _set(f"{T}.configMap", {"configMapName": "x"}),
            "only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap",
        ),
        (_set(f"{T}.trialParameters.0.name", "learning{rate}"), "name must not contain '{' or '}'"),
        (
            _set(f"{T}.trialParameters.1.name", "learning_rate"),
            f"{T}.trialParameters[1].name='learning_rate': can't be duplicated",
        ),
        (
            _set(f"{T}.trialParameters.1.reference", "learning_rate"),
            f"{T}.trialParameters[1].reference='learning_rate': can't be duplicated",
        ),
        (
            _set(f"{T}.trialParameters.0.reference", "lr"),
            f"{T}.trialParameters[0].reference='lr': does not exist in spec.parameters",
        ),
        (
            _set(f"{T}.trialParameters.3", {"name": "seed", "reference": "${trialSpec.Name}"}),
            f"{T}.trialParameters[3].name='seed': in spec.trialParameters not found in "
            "spec.trialTemplate",
        ),
        (
            _set(
                f"{T}.trialParameters",
                [
                    {"name": "learning_rate", "reference": "learning_rate"},
                    {"name": "momentum", "reference": "momentum"},
                    {"name": "num_units", "reference": "num_units"},
                ],
            ),
            "parameters: ['${trialParameters.trialName}'",
        ),
        (
            _set(f"{T}.trialSpec.metadata", {"name": "fixed"}),
            "metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
        ),
        (
            _set(f"{T}.trialSpec.kind", ""),
            "APIVersion and Kind in spec.trialTemplate must be specified",
        ),
        (
            _set(f"{T}.trialSpec.metadata", {"namespace": "team"}),
            "metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
        ),
        (
            _set(
                MC,
                {
                    "collector": {"kind": "PrometheusMetric"},
                    "source": {"httpGet": {"port": 0, "path": "/metrics"}},
                },
            ),
            "httpGet.port='0': must be a positive integer value for metrics collector kind",
        ),
        (_set("spec.parameters", []), "spec.parameters or spec.nasConfig must be specified"),
        (
            _set("spec.parameters.0.parameterType", "float"),
            "spec.parameters[0].parameterType='float': parameterType: float is not supported",
        ),
        (
            _set("spec.parameters.0.feasibleSpace.distribution", "log"),
            "distribution: log is not supported",
        ),
        (
            _set("spec.parameters.0.feasibleSpace", {}),
            "spec.parameters[0].feasibleSpace: feasibleSpace must be specified",
        ),
        (
            _set("spec.parameters.0.feasibleSpace.list", ["0.1"]),
            "feasibleSpace.list is not supported for parameterType: double",
        ),
        (
            _set("spec.parameters.0.feasibleSpace.min", DELETE),
            "feasibleSpace.max or feasibleSpace.min must be specified",
        ),
        (
            _set("spec.parameters.2.feasibleSpace.step", "1"),
            "feasibleSpace .max, .min and .step is not supported for parameterType: discrete",
        ),
        (_set(f"{MC}.collector.kind", "Stdout"), "invalid metrics collector kind: Stdout"),
        (
            _set(f"{MC}.source.fileSystemPath.path", "tmp/metrics"),
            "file path where metrics file exists is required",
        ),
        (
            _set(f"{MC}.source.fileSystemPath.kind", "Directory"),
            "file path where metrics file exists is required",
        ),
        (_set(f"{MC}.source.fileSystemPath.format", "CSV"), "format of metrics file is required"),
        (
            _set(f"{MC}.source.filter", {"metricsFormat": ["(\\w+)=(.*)"]}),
            "filter must be nil when format of metrics file is json",
        ),
        (
            _set(
                MC,
                {
                    "collector": {"kind": "StdOut"},
                    "source": {"filter": {"metricsFormat": ["val_accuracy=(.*)"]}},
                },
            ),
            "two top subexpressions are required",
        ),
        (
            _set(
                MC,
                {
                    "collector": {"kind": "TensorFlowEvent"},
                    "source": {"fileSystemPath": {"path": "/logs", "kind": "File"}},
                },
            ),
            "directory path where tensorflow event files exist",
        ),
        (unbind_num_units, "spec.parameters[2].name='num_units': is not referenced by any"),
        (_set(f"{T}.primaryContainerName", "tensorflow"), "no such container in the trial Job"),
        (
            _set(
                "spec.earlyStopping",
                {
                    "algorithmName": "medianstop",
                    "algorithmSettings": [{"name": "start_step", "value": "0"}],
                },
            ),
            "must be an integer >= 1",
        ),
    ],
)
def test_each_broken_experiment_is_refused_with_the_webhook_message(
    change: Any, message: str
) -> None:
    exp = copy.deepcopy(build())
    change(exp)
    with pytest.raises(KatibRuleError) as err:
        check_experiment(exp)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# --- Katib Trials → Vertex Trials ----------------------------------------------------------------


def katib_trial(
    name: str,
    created: str,
    assignments: dict[str, str],
    state: str | None,
    metrics: list[dict[str, str]] | None = None,
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    conditions = [{"type": "Created", "status": "True", "reason": "TrialCreated"}]
    if state:
        conditions += [
            {"type": "Running", "status": "False", "reason": "TrialRunning"},
            {"type": state, "status": "True", "reason": reason, "message": message},
        ]
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": name,
            "namespace": "team",
            "creationTimestamp": created,
            "labels": {"katib.kubeflow.org/experiment": "hpt-study"},
        },
        "spec": {"parameterAssignments": [{"name": k, "value": v} for k, v in assignments.items()]},
        "status": {
            "startTime": created,
            "completionTime": created.replace(":00Z", ":59Z") if state else None,
            "conditions": conditions,
            "observation": {"metrics": metrics} if metrics is not None else None,
        },
    }


def observed(name: str, lo: str, hi: str, latest: str) -> dict[str, str]:
    return {"name": name, "min": lo, "max": hi, "latest": latest}


ASSIGN = {"learning_rate": "0.01", "momentum": "0.9", "num_units": "128"}
KATIB_TRIALS = [
    # Listed out of order: ids follow creation time.
    katib_trial(
        "hpt-study-b",
        "2026-01-01T10:05:00Z",
        {**ASSIGN, "num_units": "64"},
        "Failed",
        reason="TrialFailed",
        message="Job has reached the specified backoff limit",
    ),
    katib_trial(
        "hpt-study-a",
        "2026-01-01T10:00:00Z",
        ASSIGN,
        "Succeeded",
        [observed("val_accuracy", "0.5", "0.91", "0.9")],
    ),
    katib_trial(
        "hpt-study-c",
        "2026-01-01T10:06:00Z",
        ASSIGN,
        "EarlyStopped",
        [observed("val_accuracy", "0.2", "0.4", "0.4")],
    ),
    katib_trial(
        "hpt-study-d",
        "2026-01-01T10:07:00Z",
        ASSIGN,
        "MetricsUnavailable",
        [observed("val_accuracy", "unavailable", "unavailable", "unavailable")],
        reason="MetricsUnavailable",
        message="Metrics are not available",
    ),
    katib_trial("hpt-study-e", "2026-01-01T10:08:00Z", ASSIGN, "Killed", reason="TrialKilled"),
    katib_trial("hpt-study-f", "2026-01-01T10:09:00Z", ASSIGN, None),
]


def test_katib_trials_become_valid_vertex_trials() -> None:
    space = default_search_space()
    converted = katib_trials.to_vertex_trials(KATIB_TRIALS, space, {"val_accuracy": "max"})
    for trial in converted:
        trials_lib.validate_trial(trial)
    by_id = {t["id"]: t for t in converted}
    assert [t["name"].rsplit("/", 1)[1] for t in converted] == [f"hpt-study-{c}" for c in "abcdef"]
    first = by_id["1"]
    assert first["state"] == trials_lib.TrialState.SUCCEEDED
    assert first["parameters"] == [
        {"parameterId": "learning_rate", "value": 0.01},
        {"parameterId": "momentum", "value": 0.9},
        {"parameterId": "num_units", "value": 128},
    ]
    assert isinstance(first["parameters"][2]["value"], int)
    assert first["finalMeasurement"] == {"metrics": [{"metricId": "val_accuracy", "value": 0.91}]}
    assert (first["startTime"], first["endTime"]) == (
        "2026-01-01T10:00:00Z",
        "2026-01-01T10:00:59Z",
    )
    assert first["name"] == "namespaces/team/trials/hpt-study-a"
    failed = by_id["2"]
    assert failed["state"] == trials_lib.TrialState.INFEASIBLE
    assert failed["infeasibleReason"] == (
        "Katib trial hpt-study-b Failed (TrialFailed: Job has reached the specified backoff limit)"
    )
    assert by_id["3"]["state"] == trials_lib.TrialState.SUCCEEDED  # early stopped, as on Vertex
    assert (
        by_id["4"]["state"] == trials_lib.TrialState.INFEASIBLE
        and "finalMeasurement" not in by_id["4"]
    )
    assert by_id["5"]["local"] == {"cancelled": True}
    assert by_id["6"]["state"] == trials_lib.TrialState.ACTIVE
    latest = katib_trials.to_vertex_trials(KATIB_TRIALS[1:2], space, {"val_accuracy": "latest"})
    assert latest[0]["finalMeasurement"]["metrics"][0]["value"] == 0.9


def test_a_katib_trial_without_a_secondary_objective_is_failed_not_ranked() -> None:
    """Katib calls it Succeeded (its objective is there); the study's other objective is not."""
    from pipelines.study.objectives import parse_objectives
    from pipelines.study.selection import SelectionError, select_best_trial

    objectives = parse_objectives(["val_accuracy", "model_size_mb:min"])
    space = dataclasses.replace(default_search_space(), metrics=objectives)
    both = [observed("val_accuracy", "0.5", "0.8", "0.8"), observed("model_size_mb", "2", "2", "2")]
    trials = [
        katib_trial("hpt-study-a", "2026-01-01T10:00:00Z", ASSIGN, "Succeeded", both),
        katib_trial("hpt-study-b", "2026-01-01T10:01:00Z", ASSIGN, "Succeeded",
                    [observed("val_accuracy", "0.5", "0.95", "0.95")]),
    ]  # fmt: skip
    strategies = {"val_accuracy": "max", "model_size_mb": "min"}
    whole, partial = katib_trials.to_vertex_trials(trials, space, strategies)
    assert trials_lib.trial_outcome(whole) == "succeeded"
    assert trials_lib.trial_outcome(partial) == "failed"
    assert partial["infeasibleReason"] == (
        "Katib trial hpt-study-b Succeeded: reported no model_size_mb (seen: val_accuracy)"
    )
    assert select_best_trial([whole, partial], objectives=objectives).trial_id == "1"
    with pytest.raises(SelectionError, match="no succeeded trial"):
        select_best_trial([partial], objectives=objectives)


def test_a_trial_outside_the_search_space_is_refused() -> None:
    stray = katib_trial("hpt-study-z", "2026-01-01T10:00:00Z", {"dropout": "0.1"}, "Succeeded", [])
    with pytest.raises(
        katib_trials.KatibTrialError, match="parameter 'dropout' is not in the search space"
    ):
        katib_trials.to_vertex_trials([stray], default_search_space(), {})


# --- the File collector (JSON) on cloudml-hypertune's file ---------------------------------------


def test_collector_reads_hypertune_lines_as_katib_does(tmp_path: Path) -> None:
    path = tmp_path / "output.metrics"
    lines = [
        {
            "val_accuracy": "0.5",
            "checkpoint_path": "",
            "global_step": "1",
            "timestamp": 1700000000.25,
            "trial": "0",
        },
        {
            "val_accuracy": "0.83",
            "checkpoint_path": "",
            "global_step": "2",
            "timestamp": 1700000001.5,
            "trial": "0",
        },
        {
            "val_accuracy": "0.8",
            "checkpoint_path": "",
            "global_step": "3",
            "timestamp": 1700000002.75,
            "trial": "0",
        },
        {
            "val_accuracy": 0.99,
            "global_step": "4",
            "timestamp": 1700000003.0,
        },  # a number: Katib skips it
    ]
    path.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))
    logs = katib_controller.collect_metric_logs(str(path), ["val_accuracy"])
    # The fraction of a float timestamp is read as nanoseconds: .25 s → 25 ns.
    assert logs == [
        ("val_accuracy", "0.5", (1700000000, 25)),
        ("val_accuracy", "0.83", (1700000001, 5)),
        ("val_accuracy", "0.8", (1700000002, 75)),
    ]
    assert katib_controller.collect_observation(str(path), ["val_accuracy", "val_loss"]) == [
        observed("val_accuracy", "0.5", "0.83", "0.8"),
        observed("val_loss", "unavailable", "unavailable", "unavailable"),
    ]
    path.write_text('{"val_loss": "0.3"}\n')
    assert katib_controller.collect_observation(str(path), ["val_accuracy"]) == [
        observed("val_accuracy", "unavailable", "unavailable", "unavailable")
    ]
    path.write_text('{"val_accuracy": "0.5"}\nepoch 1/3: val_accuracy=0.5\n')
    with pytest.raises(
        katib_trials.KatibTrialError, match=r"output.metrics:2: failed to parse the json object"
    ):
        katib_controller.collect_metric_logs(str(path), ["val_accuracy"])


# --- the tune component, the Kubernetes API replaced ---------------------------------------------


class FakeCustomObjects(HeldCustomObjects):
    """CustomObjectsApi's calls the tune step makes; records every call but the checks'.

    Every call is first held to the real method's signature and keywords
    (`fake_kube.held_to`); discovery and the dry run answer as Katib 0.19 would.
    """

    def __init__(
        self,
        states: list[dict[str, Any]],
        trials: list[dict[str, Any]],
        existing: dict[str, Any] | None = None,
    ):
        self.states, self.trials, self.existing = states, trials, existing
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.created: dict[str, Any] | None = None

    def create_namespaced_custom_object(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        body: dict[str, Any],
        dry_run: str | None = None,
    ) -> dict[str, Any]:
        from kubernetes.client import ApiException

        if dry_run == "All":  # the cluster check: Katib's webhooks, nothing stored
            return Cluster().admit(body)
        self.calls.append(("create", (group, version, namespace, plural), {}))
        if self.existing is not None:
            raise ApiException(status=409, reason="AlreadyExists")
        self.created = copy.deepcopy(body)
        return body

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any]:
        self.calls.append(("get", (group, version, namespace, plural, name), {}))
        if self.existing is not None and not any(c[0] == "get" for c in self.calls[:-1]):
            return self.existing
        base = self.created or self.existing or {}
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return {**base, "status": state}

    def patch_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append(("patch", (group, version, namespace, plural, name), body))
        return {**(self.existing or {}), "spec": {**(self.existing or {})["spec"], **body["spec"]}}

    def list_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, label_selector: str = ""
    ) -> dict[str, Any]:
        self.calls.append(
            ("list", (group, version, namespace, plural), {"label_selector": label_selector})
        )
        return {"items": self.trials}


RUNNING = {
    "conditions": [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "True", "reason": "ExperimentRunning"},
    ],
    "trialsSucceeded": 1,
    "trialsRunning": 2,
    "currentOptimalTrial": {
        "observation": {"metrics": [observed("val_accuracy", "0.5", "0.91", "0.9")]}
    },
}
SUCCEEDED = {
    "conditions": [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"},
        {
            "type": "Succeeded",
            "status": "True",
            "reason": "ExperimentMaxTrialsReached",
            "message": "Experiment has succeeded because max trial count has reached",
        },
    ],
    "trialsSucceeded": 6,
    "trialsFailed": 2,
}
FAILED = {
    "conditions": [
        {"type": "Created", "status": "True"},
        {
            "type": "Failed",
            "status": "True",
            "reason": "ExperimentFailed",
            "message": "Experiment has failed because max failed count has reached",
        },
    ],
    "trialsFailed": 2,
}


def component_args(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        **study(),
        base_output_directory="/mnt/hpt/runs/r1/study",
        namespace="team",
        display_name="HPT pipeline",
        experiment_name="",
        service_account="hpt-runner",
        data_pvc="hpt-data",
        data_mount_path="/mnt/hpt",
        cpu="2",
        memory="8Gi",
        early_stopping=True,
        timeout_s=3600,
        trials=SimpleNamespace(path=str(tmp_path / "trials.json"), metadata={}),
    )
    values.update(overrides)
    return values


def test_tune_component_end_to_end_with_the_api_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.targets.kubeflow.steps.tune import tune_on_katib

    api = FakeCustomObjects([RUNNING, RUNNING, SUCCEEDED], KATIB_TRIALS)
    monkeypatch.setattr(kube, "custom_objects_api", lambda: api)
    monkeypatch.setattr(kube, "core_v1_api", lambda: Cluster().core)
    monkeypatch.setattr(katib_tune, "DEFAULT_POLL_S", 0.001)
    args = component_args(tmp_path)
    tune_on_katib.python_func(**args)

    name = katib.experiment_name("HPT pipeline", "/mnt/hpt/runs/r1/study")
    body = api.created
    assert body is not None
    assert body["metadata"]["name"] == name and body["metadata"]["namespace"] == "team"
    assert body == build(
        name=name,
        early_stopping=True,
        service_account="hpt-runner",
        pvc_name="hpt-data",
        data_mount_path="/mnt/hpt",
        base_output_directory="/mnt/hpt/runs/r1/study",
        resume_policy="Never",  # a per-run study folder (no study_dir): no PVC left per run
    )
    spec = body["spec"]
    assert spec["resumePolicy"] == "Never" and spec["trialTemplate"]["retain"] is True
    assert body["metadata"]["labels"] == {"app.kubernetes.io/part-of": "hpt-pipeline"}
    assert spec["maxTrialCount"] == 8 and isinstance(spec["maxTrialCount"], int)
    assert spec["earlyStopping"]["algorithmName"] == "medianstop"
    assert container(body)["resources"]["limits"] == {"cpu": "2", "memory": "8Gi"}
    assert api.calls[0] == ("create", ("kubeflow.org", "v1beta1", "team", "experiments"), {})
    assert api.calls[-1] == (
        "list",
        ("kubeflow.org", "v1beta1", "team", "trials"),
        {"label_selector": f"katib.kubeflow.org/experiment={name}"},
    )
    written = trials_lib.read_trials(args["trials"].path)
    assert [t["id"] for t in written] == ["1", "2", "3", "4", "5", "6"]
    assert written[0]["finalMeasurement"]["metrics"] == [
        {"metricId": "val_accuracy", "value": 0.91}
    ]
    assert args["trials"].metadata["source"] == "katib"
    assert args["trials"].metadata["study"] == f"team/{name}"
    assert args["trials"].metadata["states"] == {"SUCCEEDED": 2, "INFEASIBLE": 3, "ACTIVE": 1}
    out = capsys.readouterr().out
    assert f"Experiment team/{name}: created" in out
    assert (
        f"Experiment team/{name}: Running, 1/8 trials done (1 succeeded), 2 running; "
        "best val_accuracy=0.91" in out
    )
    assert (
        f"Experiment team/{name}: Succeeded, 8/8 trials done (6 succeeded, 2 failed), 0 running"
        in out
    )
    assert out.count("Running, 1/8") == 1  # a line is printed when it changes


def test_tune_fails_with_katibs_reason_when_the_failure_budget_is_spent(tmp_path: Path) -> None:
    api = FakeCustomObjects([RUNNING, FAILED], [])
    with pytest.raises(
        KubeflowJobError,
        match=r"Experiment team/.*failed: Failed \(ExperimentFailed\): "
        "Experiment has failed because max failed count has reached",
    ):
        run(tmp_path, api)
    assert not any(c[0] == "list" for c in api.calls)


def test_tune_times_out_naming_the_experiment(tmp_path: Path) -> None:
    api = FakeCustomObjects([RUNNING], [])
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    with pytest.raises(
        KubeflowJobError,
        match=r"did not finish within 90s \(last condition: Running \(ExperimentRunning\)\)",
    ):
        run(tmp_path, api, timeout_s=90, poll_s=30, clock=lambda: now[0], sleep=sleep)


def run(tmp_path: Path, api: Any, **options: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    args = component_args(tmp_path)
    for key in ("trials", "data_pvc", "data_mount_path"):
        args.pop(key)
    args.update(
        pvc_name="hpt-data",
        data_mount_path="/mnt/hpt",
        api=api,
        core_api=Cluster().core,
        sleep=lambda s: None,
        echo=lambda line: None,
    )
    args.update(options)
    return call_with_request(katib_tune.run_katib_study, katib_tune.StudyRequest, args)


def test_a_rerun_resumes_the_same_experiment(tmp_path: Path) -> None:
    first = FakeCustomObjects([SUCCEEDED], KATIB_TRIALS)
    run(tmp_path, first)
    existing = {**copy.deepcopy(first.created), "status": {**SUCCEEDED, "trials": 8}}  # type: ignore[dict-item]

    same = FakeCustomObjects([SUCCEEDED], KATIB_TRIALS, existing=existing)
    done, trials = run(tmp_path, same)
    assert [c[0] for c in same.calls] == ["create", "get", "get", "list"]
    assert len(trials) == 6

    stale = {**SUCCEEDED, "trials": 8}  # read before Katib's controller acts on the patch
    restarting = {"conditions": [{"type": "Restarting", "status": "True"}], "trials": 8}
    more = FakeCustomObjects([stale, restarting, SUCCEEDED], KATIB_TRIALS, existing=existing)
    run(tmp_path, more, max_trial_count=12.0)
    assert [c[0] for c in more.calls] == ["create", "get", "patch", "get", "get", "get", "list"]
    patches = [c for c in more.calls if c[0] == "patch"]
    assert patches == [
        (
            "patch",
            ("kubeflow.org", "v1beta1", "team", "experiments", existing["metadata"]["name"]),
            {"spec": {"maxTrialCount": 12}},
        )
    ]

    failed = FakeCustomObjects([FAILED], [], existing={**existing, "status": FAILED})
    with pytest.raises(KubeflowJobError, match=r"existed before this task: `kubectl delete"):
        run(tmp_path, failed)

    other = FakeCustomObjects([SUCCEEDED], KATIB_TRIALS, existing=existing)
    with pytest.raises(KubeflowJobError, match="exists with another spec"):
        run(tmp_path, other, study_spec_algorithm="RANDOM_SEARCH")


# --- the trial template through the local executors ----------------------------------------------


def wrap_like_katib(c: dict[str, Any], metrics_dir: str) -> list[str]:
    """The primary container's command after Katib's pod webhook (utils.go l.155-194).

    `sh -c "<command and args joined by spaces> && echo completed > <dir>/$$.pid"`
    (`$$$$` in the pod spec; Kubernetes turns `$$` into `$`). `python` is this interpreter.
    """
    words = [sys.executable if w == "python" else w for w in [*c["command"], *c["args"]]]
    return ["sh", "-c", " ".join(words) + f" && echo completed > {metrics_dir}/$$.pid"]


def run_trial_locally(
    exp: dict[str, Any], assignments: dict[str, str], trial_name: str, tmp_path: Path
) -> dict[str, Any]:
    """One Katib trial here: render, wrap, run with local_job, collect; a Katib Trial back."""
    job = katib_controller.render_run_spec(
        exp, assignments, trial_name=trial_name, namespace="team"
    )
    c = job["spec"]["template"]["spec"]["containers"][0]
    metrics_dir = tmp_path / trial_name / "hypertune"  # the emptyDir Katib mounts there
    metrics_dir.mkdir(parents=True)
    env = {e["name"]: e["value"] for e in c["env"]}
    metrics_file = str(metrics_dir / os.path.basename(env["CLOUD_ML_HP_METRIC_FILE"]))
    spec = [
        {
            "machine_spec": {"machine_type": "n1-standard-4"},
            "replica_count": 1,
            "container_spec": {
                "image_uri": c["image"],
                "command": wrap_like_katib(c, str(metrics_dir)),
                "env": [{"name": k, "value": v} for k, v in env.items()],
            },
        }
    ]
    local_job.run_custom_job(
        spec,
        None,
        extra_env={"CLOUD_ML_HP_METRIC_FILE": metrics_file},
        log_dir=str(tmp_path / trial_name),
        cwd=str(ROOT),
        echo=None,
        timeout=120,
    )
    assert (metrics_dir / "completed").exists() is False
    assert any(p.suffix == ".pid" and p.read_text() == "completed\n" for p in metrics_dir.iterdir())
    names = [exp["spec"]["objective"]["objectiveMetricName"]]
    observation = katib_controller.collect_observation(metrics_file, names)
    trial = katib_trial(trial_name, "2026-01-01T10:00:00Z", assignments, "Succeeded", observation)
    trial["status"]["env"] = env  # for the test's own checks
    return trial


def test_katib_experiment_through_the_local_executors(tmp_path: Path) -> None:
    """Trainer (fake, same hypertune calls), trial template and File collector fit together."""
    exp = build(
        worker_pool_specs=as_kfp_renders(
            pools(
                command=["python", "tests/fake_trainer.py"],
                args=["--epochs=3", f"--ledger={tmp_path / 'ledger.jsonl'}"],
            )
        ),
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
    )
    check_experiment(exp)
    suggested = [
        {"learning_rate": "0.01", "momentum": "0.9", "num_units": "128"},
        {"learning_rate": "0.004", "momentum": "0.75", "num_units": "64"},
    ]
    trials = [
        run_trial_locally(exp, a, f"hpt-study-{i}", tmp_path) for i, a in enumerate(suggested)
    ]
    assert trials[0]["status"]["env"]["CLOUD_ML_TRIAL_ID"] == "hpt-study-0"
    # What the trainer process saw: the substituted flags, its trial name, the metrics file.
    seen = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["trial"] for r in seen] == ["hpt-study-0", "hpt-study-1"]
    assert seen[1]["params"] == {"learning_rate": 0.004, "momentum": 0.75, "num_units": 64}
    assert seen[1]["env"]["CLOUD_ML_HP_METRIC_FILE"] == str(
        tmp_path / "hpt-study-1" / "hypertune" / "output.metrics"
    )
    converted = katib_trials.to_vertex_trials(
        trials, default_search_space(), katib_trials.metric_strategies(exp)
    )
    for trial, assigned in zip(converted, suggested, strict=True):
        trials_lib.validate_trial(trial)
        params = trials_lib.trial_parameters(trial)
        assert params == {
            "learning_rate": float(assigned["learning_rate"]),
            "momentum": float(assigned["momentum"]),
            "num_units": int(assigned["num_units"]),
        }
        # BEST → max: the curve rises, so epoch 3's value, exactly as the trainer reported it.
        expected = fake_trainer.epoch_value(params, 3)
        assert trials_lib.final_metric(trial, "val_accuracy") == pytest.approx(expected, rel=1e-12)
    assert trials_lib.final_metric(converted[0], "val_accuracy") > trials_lib.final_metric(
        converted[1], "val_accuracy"
    )  # type: ignore[operator]


def test_render_refuses_assignments_katib_would_refuse() -> None:
    exp = build()
    with pytest.raises(katib_trials.KatibTrialError, match="parameter 'momentum': no assignment"):
        katib_controller.render_run_spec(
            exp, {"learning_rate": "0.01", "num_units": "64"}, trial_name="t", namespace="n"
        )
    with pytest.raises(katib_trials.KatibTrialError, match="are not all trial parameters"):
        katib_controller.render_run_spec(
            exp, {**ASSIGN, "dropout": "0.1"}, trial_name="t", namespace="n"
        )
    job = katib_controller.render_run_spec(exp, ASSIGN, trial_name="hpt-study-x", namespace="team")
    assert job["metadata"] == {"name": "hpt-study-x", "namespace": "team"}
    assert "${" not in json.dumps(job)
    assert container({"spec": {"trialTemplate": {"trialSpec": job}}})["args"][-3:] == [
        "--learning_rate=0.01",
        "--momentum=0.9",
        "--num_units=128",
    ]


def test_render_fills_trial_metadata_references_as_katib_does() -> None:
    exp = build()
    spec = exp["spec"]["trialTemplate"]["trialSpec"]
    spec["metadata"] = {"labels": {"app": "hpt"}, "annotations": {}}
    meta = {"Name": "n", "Namespace": "ns", "Kind": "k", "APIVersion": "v", "Labels[app]": "l"}
    for key, short in meta.items():
        exp["spec"]["trialTemplate"]["trialParameters"].append(
            {"name": short, "reference": "${trialSpec." + key + "}"}
        )
        spec["metadata"]["annotations"][key] = "${trialParameters." + short + "}"
    job = katib_controller.render_run_spec(exp, ASSIGN, trial_name="t-1", namespace="team")
    assert job["metadata"]["annotations"] == {
        "Name": "t-1",
        "Namespace": "team",
        "Kind": spec["kind"],
        "APIVersion": spec["apiVersion"],
        "Labels[app]": "hpt",
    }
    exp["spec"]["trialTemplate"]["trialParameters"][-1]["reference"] = "${trialSpec.Labels[x]}"
    with pytest.raises(katib_trials.KatibTrialError, match="illegal reference"):
        katib_controller.render_run_spec(exp, ASSIGN, trial_name="t-1", namespace="team")


@pytest.mark.slow
def test_the_real_trainer_through_the_katib_trial_template(
    synthetic_data: str, tmp_path: Path
) -> None:
    """The real trainer's hypertune file, read as Katib's File collector (JSON) reads it."""
    from trainer.contract import DEFAULT_METRIC_FILE

    assert DEFAULT_METRIC_FILE == katib.METRICS_FILE  # one reporting path, its default place
    study_dir = str(tmp_path / "study")
    exp = build(
        worker_pool_specs=as_kfp_renders(
            pools(args=[f"--data={synthetic_data}", "--epochs=2", "--batch_size=16"])
        ),
        base_output_directory=study_dir,
    )
    check_experiment(exp)
    assigned = {"learning_rate": "0.02", "momentum": "0.8", "num_units": "64"}
    trial = run_trial_locally(exp, assigned, "hpt-study-real", tmp_path)
    (converted,) = katib_trials.to_vertex_trials(
        [trial], default_search_space(), katib_trials.metric_strategies(exp)
    )
    trials_lib.validate_trial(converted)
    reported = [
        json.loads(line)
        for line in (tmp_path / "hpt-study-real" / "hypertune" / "output.metrics")
        .read_text()
        .splitlines()
    ]
    costs = [r for r in reported if "latency_ms" in r or "model_size_mb" in r]
    assert [r["global_step"] for r in costs] == ["2", "2"]  # measured once, with the last step
    # Every validation metric, each epoch: a study may take any of them as an objective.
    assert [r["global_step"] for r in reported if "val_loss" in r] == ["1", "2"]
    accuracy = [r for r in reported if "val_accuracy" in r]
    assert [r["global_step"] for r in accuracy] == ["1", "2"]
    assert all(isinstance(r["val_accuracy"], str) for r in accuracy)  # what Katib takes
    best = max(float(r["val_accuracy"]) for r in accuracy)
    assert trials_lib.final_metric(converted, "val_accuracy") == best
    # Vertex's per-trial folders, named by the Katib trial: the trial's model card is there.
    assert (Path(study_dir) / "hpt-study-real" / "model" / "model.json").exists()
