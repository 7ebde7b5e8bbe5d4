"""Katib's admission rules, rule by rule: the whole one-line refusal, and the edge that passes.

Each case starts from an Experiment the kubeflow target compiles (`build`, the mixed space
with early stopping) and changes one field the way a hand edit or another release's
defaults would; Katib's webhook (`validator.go`), its grid service and medianstop refuse
it, and so must `check_experiment`, naming the field, the value and the rule. The cases
that pass sit on each rule's edge (a name of exactly 40 characters, as many failures
allowed as trials, a port of 1), so a rule moved by one is seen.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
import pytest

from pipelines.settings import Settings
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.targets.kubeflow import manifests
from pipelines.targets.kubeflow.katib_rules import (
    KatibRuleError,
    check_experiment,
    is_meta_reference,
)
from tests.test_kubeflow_katib import build, mixed_space

T = "spec.trialTemplate"
MC = "spec.metricsCollectorSpec"
SRC = "spec.metricsCollectorSpec.source"
GONE = object()  # the field is deleted
NAME_RULE = (
    "must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, end with an alphanumeric character, at most 40 characters"
)
ALGORITHMS = (
    "random, tpe, grid, hyperband, bayesianoptimization, cmaes, sobol, multivariate-tpe, "
    "enas, darts, pbt"
)


@functools.cache
def _compiled(algorithm: str) -> dict[str, Any]:
    if algorithm == "GRID_SEARCH":
        space = SearchSpace(parameters=(Parameter("num_units", "integer", min=1, max=3),))
        return build(space, study_spec_algorithm=algorithm, max_trial_count=3.0)
    return build(mixed_space(), early_stopping=True, study_spec_algorithm=algorithm)


def compiled(algorithm: str = "ALGORITHM_UNSPECIFIED") -> dict[str, Any]:
    """A fresh copy of the compiled Experiment: for the default algorithm the mixed space
    (double, double, int, discrete, categorical) with medianstop; for grid, one integer."""
    return copy.deepcopy(_compiled(algorithm))


def edited(exp: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`exp` with each dotted path (`__` for `.`, digits index lists) set, or deleted (GONE)."""
    for path, value in changes.items():
        *parents, last = path.split("__")
        target: Any = exp
        for part in parents:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        key: Any = int(last) if last.isdigit() else last
        if value is GONE:
            del target[key]
        elif isinstance(target, list) and key == len(target):
            target.append(value)
        else:
            target[key] = value
    return exp


def refusal(exp: dict[str, Any]) -> str:
    with pytest.raises(KatibRuleError) as err:
        check_experiment(exp)
    return str(err.value)


def collector(kind: str | None = None, **source: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"source": source} if source else {}
    if kind is not None:
        spec["collector"] = {"kind": kind}
    return spec


REFUSED = [
    # metadata and counts (validator.go l.84-115)
    ({"metadata__name": "Hpt"}, f"metadata.name='Hpt': {NAME_RULE}"),
    ({"metadata__name": "h" * 41}, f"metadata.name='{'h' * 41}': {NAME_RULE}"),
    ({"metadata__name": "hpt-"}, f"metadata.name='hpt-': {NAME_RULE}"),
    ({"metadata__name": "9hpt"}, f"metadata.name='9hpt': {NAME_RULE}"),
    ({"metadata": GONE}, f"metadata.name='': {NAME_RULE}"),
    ({"spec__maxFailedTrialCount": -1}, "spec.maxFailedTrialCount=-1: should not be less than 0"),
    ({"spec__maxTrialCount": 0}, "spec.maxTrialCount=0: must be greater than 0"),
    ({"spec__parallelTrialCount": 0}, "spec.parallelTrialCount=0: must be greater than 0"),
    (
        {"spec__maxFailedTrialCount": 9},
        "spec.maxFailedTrialCount=9: should be less than or equal to spec.maxTrialCount",
    ),
    (
        {"spec__parallelTrialCount": 9},
        "spec.parallelTrialCount=9: should be less than or equal to spec.maxTrialCount",
    ),
    # objective (l.186-200)
    ({"spec__objective": GONE}, "spec.objective: must be specified"),
    ({"spec__objective__type": GONE}, "spec.objective.type: must be minimize or maximize"),
    (
        {"spec__objective__type": "maximise"},
        "spec.objective.type='maximise': must be minimize or maximize",
    ),
    (
        {"spec__objective__objectiveMetricName": GONE},
        "spec.objective.objectiveMetricName: must be specified",
    ),
    (
        {"spec__objective__additionalMetricNames": ["val_loss", "val_accuracy"]},
        "spec.objective.additionalMetricNames=['val_loss', 'val_accuracy']: should not contain "
        "spec.objective.objectiveMetricName",
    ),
    # algorithm and early stopping (l.207-236)
    ({"spec__algorithm": GONE}, "spec.algorithm: must be specified"),
    ({"spec__algorithm__algorithmName": ""}, "spec.algorithm.algorithmName: must be specified"),
    (
        {"spec__algorithm__algorithmName": "bayesian"},
        "spec.algorithm.algorithmName='bayesian': unable to get Suggestion config data for "
        f"algorithm bayesian (a default install has {ALGORITHMS})",
    ),
    (
        {"spec__earlyStopping__algorithmName": GONE},
        "spec.earlyStopping.algorithmName: must be specified",
    ),
    (
        {"spec__earlyStopping__algorithmName": "hyperband"},
        "spec.earlyStopping.algorithmName='hyperband': unable to get EarlyStopping config data "
        "for algorithm hyperband",
    ),
    ({"spec__resumePolicy": "Always"}, "spec.resumePolicy='Always': invalid ResumePolicyType"),
    # the trial template (l.309-429)
    ({"spec__trialTemplate": GONE}, f"{T}: must be specified"),
    (
        {"spec__trialTemplate__primaryContainerName": GONE},
        f"{T}.primaryContainerName: must be specified",
    ),
    (
        {"spec__trialTemplate__successCondition": GONE},
        f"{T}: successCondition and failureCondition must be specified",
    ),
    (
        {"spec__trialTemplate__failureCondition": ""},
        f"{T}: successCondition and failureCondition must be specified",
    ),
    ({"spec__trialTemplate__trialParameters": GONE}, f"{T}.trialParameters: must be specified"),
    (
        {"spec__trialTemplate__trialSpec": GONE},
        f"{T}: spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified",
    ),
    (
        {"spec__trialTemplate__configMap": {"configMapName": "trial-templates"}},
        f"{T}: only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap can be "
        "specified",
    ),
    *(
        (
            {f"spec__trialTemplate__trialParameters__0__{key}": value},
            f"{T}.trialParameters[0]: name and reference must be specified and name must not "
            "contain '{' or '}'",
        )
        for key, value in (
            ("name", ""),
            ("reference", GONE),
            ("name", "{learning_rate"),
            ("name", "learning_rate}"),
        )
    ),
    (
        {"spec__trialTemplate__trialParameters__1__name": "learning_rate"},
        f"{T}.trialParameters[1].name='learning_rate': can't be duplicated in "
        "spec.trialTemplate.trialParameters",
    ),
    (
        {"spec__trialTemplate__trialParameters__1__reference": "learning_rate"},
        f"{T}.trialParameters[1].reference='learning_rate': can't be duplicated in "
        "spec.trialTemplate.trialParameters",
    ),
    (
        {"spec__trialTemplate__trialParameters__0__reference": "lr"},
        f"{T}.trialParameters[0].reference='lr': does not exist in spec.parameters",
    ),
    (
        {"spec__trialTemplate__trialParameters__5__reference": "${trialSpec.Uid}"},
        f"{T}.trialParameters[5].reference='${{trialSpec.Uid}}': does not exist in spec.parameters",
    ),
    (
        {"spec__trialTemplate__trialParameters__5__reference": "${trialSpec.Spec[replicas]}"},
        f"{T}.trialParameters[5].reference='${{trialSpec.Spec[replicas]}}': does not exist in "
        "spec.parameters",
    ),
    (
        {
            "spec__trialTemplate__trialParameters__6": {
                "name": "seed",
                "reference": "${trialSpec.Kind}",
            }
        },
        f"{T}.trialParameters[6].name='seed': in spec.trialParameters not found in "
        "spec.trialTemplate",
    ),
    (
        {"spec__trialTemplate__trialParameters__5": GONE},
        f"{T}: parameters: ['${{trialParameters.trialName}}'] in spec.trialTemplate not found in "
        "spec.trialParameters",
    ),
    (
        {"spec__trialTemplate__trialSpec__metadata": {"name": "${trialParameters.trialName}"}},
        f"{T}: metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
    ),
    (
        {"spec__trialTemplate__trialSpec__metadata": {"namespace": "team"}},
        f"{T}: metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
    ),
    (
        {"spec__trialTemplate__trialSpec__apiVersion": GONE},
        f"{T}: APIVersion and Kind in spec.trialTemplate must be specified",
    ),
    (
        {"spec__trialTemplate__trialSpec__kind": ""},
        f"{T}: APIVersion and Kind in spec.trialTemplate must be specified",
    ),
    # parameters (l.162-169, l.259-297)
    ({"spec__parameters": GONE}, "spec: spec.parameters or spec.nasConfig must be specified"),
    (
        {"spec__nasConfig": {"graphConfig": {"numLayers": 2}}},
        "spec: only one of spec.parameters and spec.nasConfig can be specified",
    ),
    (
        {"spec__parameters__2__parameterType": "integer"},
        "spec.parameters[2].parameterType='integer': parameterType: integer is not supported",
    ),
    (
        {"spec__parameters__0__feasibleSpace__distribution": "log"},
        "spec.parameters[0].feasibleSpace.distribution='log': distribution: log is not supported",
    ),
    (
        {"spec__parameters__3__feasibleSpace": {"list": []}},
        "spec.parameters[3].feasibleSpace: feasibleSpace must be specified",
    ),
    (
        {"spec__parameters__0__feasibleSpace__list": ["0.01"]},
        "spec.parameters[0].feasibleSpace.list=['0.01']: feasibleSpace.list is not supported for "
        "parameterType: double",
    ),
    (
        {"spec__parameters__2__feasibleSpace__list": ["16"]},
        "spec.parameters[2].feasibleSpace.list=['16']: feasibleSpace.list is not supported for "
        "parameterType: int",
    ),
    *(
        (
            {f"spec__parameters__{i}__feasibleSpace__{bound}": GONE},
            f"spec.parameters[{i}].feasibleSpace.max: feasibleSpace.max or feasibleSpace.min must "
            f"be specified for parameterType: {kind}",
        )
        for i, kind, bound in ((0, "double", "min"), (2, "int", "max"))
    ),
    *(
        (
            {f"spec__parameters__{i}__feasibleSpace__{key}": "2"},
            f"spec.parameters[{i}].feasibleSpace: feasibleSpace .max, .min and .step is not "
            f"supported for parameterType: {kind}",
        )
        for i, kind, key in (
            (3, "discrete", "max"),
            (3, "discrete", "min"),
            (4, "categorical", "step"),
        )
    ),
    # the metrics collector (l.495-571)
    (
        {"spec__metricsCollectorSpec": collector("Stdout")},
        f"{MC}.collector.kind='Stdout': invalid metrics collector kind: Stdout",
    ),
    (
        {"spec__metricsCollectorSpec__source__fileSystemPath__path": "tmp/metrics"},
        f"{SRC}.fileSystemPath.path='tmp/metrics': file path where metrics file exists is required",
    ),
    (
        {"spec__metricsCollectorSpec__source__fileSystemPath__kind": "Directory"},
        f"{SRC}.fileSystemPath.path='/tmp/hypertune/output.metrics': file path where metrics file "
        "exists is required",
    ),
    (
        {"spec__metricsCollectorSpec__source": GONE},
        f"{SRC}.fileSystemPath.path: file path where metrics file exists is required",
    ),
    (
        {"spec__metricsCollectorSpec__source__fileSystemPath__format": "CSV"},
        f"{SRC}.fileSystemPath.format='CSV': format of metrics file is required for metrics "
        "collector",
    ),
    (
        {"spec__metricsCollectorSpec__source__fileSystemPath__format": GONE},
        f"{SRC}.fileSystemPath.format: format of metrics file is required for metrics collector",
    ),
    (
        {"spec__metricsCollectorSpec__source__filter": {"metricsFormat": ["(\\w+)=(.+)"]}},
        f"{SRC}.filter: filter must be nil when format of metrics file is json",
    ),
    *(
        (
            {
                "spec__metricsCollectorSpec": collector(
                    "TensorFlowEvent", fileSystemPath={"path": path, "kind": kind}
                )
            },
            f"{SRC}: directory path where tensorflow event files exist is required by "
            ".spec.metricsCollectorSpec.source.fileSystemPath.path",
        )
        for path, kind in (("/logs", "File"), ("logs", "Directory"))
    ),
    (
        {"spec__metricsCollectorSpec": collector("TensorFlowEvent")},
        f"{SRC}: directory path where tensorflow event files exist is required by "
        ".spec.metricsCollectorSpec.source.fileSystemPath.path",
    ),
    (
        {
            "spec__metricsCollectorSpec": collector(
                "TensorFlowEvent",
                fileSystemPath={"path": "/logs", "kind": "Directory", "format": "TEXT"},
            )
        },
        f"{SRC}.fileSystemPath.format='TEXT': must be empty",
    ),
    *(
        (
            {
                "spec__metricsCollectorSpec": collector(
                    "PrometheusMetric", httpGet={"path": "/metrics"} | port
                )
            },
            f"{SRC}.httpGet.port='{shown}': must be a positive integer value for metrics "
            "collector kind: PrometheusMetric",
        )
        for port, shown in (({"port": 0}, "0"), ({"port": "http"}, "http"), ({}, ""))
    ),
    (
        {
            "spec__metricsCollectorSpec": collector(
                "PrometheusMetric", httpGet={"port": 8080, "path": "metrics"}
            )
        },
        f"{SRC}.httpGet.path='metrics': path is invalid for metrics collector kind: "
        "PrometheusMetric",
    ),
    (
        {"spec__metricsCollectorSpec": collector("PrometheusMetric", httpGet={"port": 8080})},
        f"{SRC}.httpGet.path: path is invalid for metrics collector kind: PrometheusMetric",
    ),
    (
        {"spec__metricsCollectorSpec": collector("Custom")},
        f"{MC}.collector.customCollector: metrics collector kind: Custom is required",
    ),
    *(
        (
            {
                "spec__metricsCollectorSpec": {
                    "collector": {"kind": "Custom", "customCollector": {"name": "c"}},
                    "source": {"fileSystemPath": {"path": path, "kind": kind}},
                }
            },
            f"{SRC}.fileSystemPath: .spec.metricsCollectorSpec.source is invalid",
        )
        for path, kind in (("out/metrics", "File"), ("/out", "Socket"))
    ),
    (
        {
            "spec__metricsCollectorSpec": collector(
                "StdOut", filter={"metricsFormat": ["(\\w+)=(.+)", "val_accuracy=(.+)"]}
            )
        },
        f"{SRC}.filter.metricsFormat='val_accuracy=(.+)': two top subexpressions are required",
    ),
    # Katib after admission: the trial's generation, the pod, medianstop
    (
        {"spec__trialTemplate__trialParameters__2__reference": "${trialSpec.Namespace}"},
        "spec.parameters[2].name='num_units': is not referenced by any "
        "spec.trialTemplate.trialParameters (run time: the trial cannot be generated)",
    ),
    (
        {"spec__trialTemplate__primaryContainerName": "tensorflow"},
        f"{T}.primaryContainerName='tensorflow': no such container in the trial Job (run time), "
        "containers: ['training-container']",
    ),
    *(
        (
            {"spec__earlyStopping__algorithmSettings__0": {"name": name, "value": value}},
            f"spec.earlyStopping.algorithmSettings[{name}]={str(value)!r}: must be an integer >= 1",
        )
        for name, value in (
            ("min_trials_required", "0"),
            ("start_step", "0"),
            ("start_step", "-3"),
            ("start_step", "3-"),
            ("start_step", "two"),
            ("start_step", "X1"),
            ("start_step", None),
        )
    ),
    (
        {"spec__earlyStopping__algorithmSettings__1": {"name": "min_step", "value": "1"}},
        "spec.earlyStopping.algorithmSettings='min_step': unknown setting for algorithm medianstop",
    ),
]


@pytest.mark.parametrize(("changes", "message"), REFUSED)
def test_each_rule_refuses_an_edited_experiment_with_its_whole_line(
    changes: dict[str, Any], message: str
) -> None:
    assert refusal(edited(compiled(), **changes)) == message


def test_an_invalid_filter_regex_is_refused_naming_it() -> None:
    exp = edited(
        compiled(),
        spec__metricsCollectorSpec=collector("StdOut", filter={"metricsFormat": ["(\\w+=(.+)"]}),
    )
    message = refusal(exp)
    assert message.startswith(f"{SRC}.filter.metricsFormat='(\\\\w+=(.+)': invalid filter: ")
    assert "missing )" in message and "\n" not in message


ACCEPTED = [
    {"metadata__name": "h" * 40},
    {"metadata__name": "a"},
    {"metadata__name": "h-1"},
    {"spec__maxFailedTrialCount": 0},
    {"spec__maxFailedTrialCount": 8, "spec__parallelTrialCount": 8},
    {"spec__maxTrialCount": 1, "spec__parallelTrialCount": 1, "spec__maxFailedTrialCount": 1},
    {"spec__maxTrialCount": GONE},
    {"spec__maxFailedTrialCount": GONE, "spec__parallelTrialCount": GONE},
    {
        "spec__objective__type": "minimize",
        "spec__objective__objectiveMetricName": "val_loss",
        "spec__objective__additionalMetricNames": ["val_accuracy"],
    },
    {"spec__objective__additionalMetricNames": GONE},
    {"spec__algorithm__algorithmName": "random"},
    {"spec__earlyStopping": GONE},
    {"spec__earlyStopping__algorithmSettings": GONE},
    {"spec__resumePolicy": GONE},
    {"spec__resumePolicy": "Never"},
    # a template kept in a ConfigMap is not looked into (its text is not in the Experiment)
    {
        "spec__trialTemplate__trialSpec": GONE,
        "spec__trialTemplate__configMap": {"configMapName": "t"},
    },
    # the Trial's metadata by key or by label: no Experiment parameter needed
    {"spec__trialTemplate__trialParameters__5__reference": "${trialSpec.Labels[app]}"},
    {"spec__trialTemplate__trialParameters__5__reference": "${trialSpec.Annotations[a.b/c]}"},
    {"spec__trialTemplate__trialSpec__metadata": {"labels": {"app": "hpt"}}},
    # a NAS Experiment: nasConfig instead of parameters, the references unchecked
    {"spec__parameters": [], "spec__nasConfig": {"graphConfig": {"numLayers": 2}}},
    {"spec__parameters__0__feasibleSpace__distribution": GONE},
    {"spec__parameters__2__feasibleSpace__step": "2"},
    {"spec__parameters__3__parameterType": "categorical"},
    {"spec__metricsCollectorSpec": GONE},
    {"spec__metricsCollectorSpec": collector(None)},
    {"spec__metricsCollectorSpec": collector("Push")},
    {"spec__metricsCollectorSpec": collector("StdOut", filter={"metricsFormat": ["(\\w+)=(.+)"]})},
    {"spec__metricsCollectorSpec": collector("StdOut", filter={})},
    {
        "spec__metricsCollectorSpec__source__fileSystemPath__format": "TEXT",
        "spec__metricsCollectorSpec__source__filter": {"metricsFormat": ["(\\w+)=(.+)"]},
    },
    {
        "spec__metricsCollectorSpec": collector(
            "TensorFlowEvent", fileSystemPath={"path": "/logs", "kind": "Directory"}
        )
    },
    {
        "spec__metricsCollectorSpec": collector(
            "PrometheusMetric", httpGet={"port": 1, "path": "/metrics"}
        )
    },
    {
        "spec__metricsCollectorSpec": collector(
            "PrometheusMetric", httpGet={"port": "8080", "path": "/"}
        )
    },
    {
        "spec__metricsCollectorSpec": {
            "collector": {"kind": "Custom", "customCollector": {"name": "c"}}
        }
    },
    *(
        {
            "spec__metricsCollectorSpec": {
                "collector": {"kind": "Custom", "customCollector": {"name": "c"}},
                "source": {"fileSystemPath": {"path": "/out", "kind": kind}},
            }
        }
        for kind in ("File", "Directory")
    ),
    # a trial that is no Job (a TFJob) names its container as its operator does
    {
        "spec__trialTemplate__trialSpec__kind": "TFJob",
        "spec__trialTemplate__primaryContainerName": "tensorflow",
    },
    {
        "spec__earlyStopping__algorithmSettings": [
            {"name": "min_trials_required", "value": "1"},
            {"name": "start_step", "value": "1"},
        ]
    },
]


@pytest.mark.parametrize("changes", ACCEPTED)
def test_what_katib_admits_passes_at_each_rules_edge(changes: dict[str, Any]) -> None:
    check_experiment(edited(compiled(), **changes))


def test_the_experiments_the_manifests_write_pass_for_job_and_trainjob_trials() -> None:
    for nodes in (1, 2):
        files = manifests.build(
            Settings(kubeflow_namespace="team", data_pvc="hpt-data", kubeflow_trial_nodes=nodes)
        )
        (exp,) = files["experiment.yaml"]
        check_experiment(exp)


@pytest.mark.parametrize(
    ("reference", "meta"),
    [
        ("${trialSpec.Name}", True),
        ("${trialSpec.APIVersion}", True),
        ("${trialSpec.Labels[app]}", True),
        ("${trialSpec.Annotations[a]}", True),
        ("${trialSpec.Uid}", False),
        ("${trialSpec.Spec[replicas]}", False),
        ("${trialSpec.Labels[]}", False),
        ("${trialSpec.}", False),
        ("learning_rate", False),
        ("Name", False),
    ],
)
def test_a_trial_parameter_refers_to_the_trials_metadata_only_by_katibs_keys(
    reference: str, meta: bool
) -> None:
    assert is_meta_reference(reference) is meta


# --- grid: the suggestion service's count of combinations (run time) -------------------------


def grid(*parameters: dict[str, Any], max_trials: int | None) -> dict[str, Any]:
    """The compiled grid Experiment with its parameters replaced (and bound in the template)."""
    exp = compiled("GRID_SEARCH")
    spec = exp["spec"]
    spec["parameters"] = list(parameters)
    template = spec["trialTemplate"]
    template["trialParameters"] = [
        {"name": p["name"], "reference": p["name"]} for p in parameters
    ] + [{"name": "trialName", "reference": "${trialSpec.Name}"}]
    template["trialSpec"]["spec"]["template"]["spec"]["containers"][0]["args"] = [
        f"--{p['name']}=${{trialParameters.{p['name']}}}" for p in parameters
    ]
    spec["maxTrialCount"] = max_trials
    spec["parallelTrialCount"] = spec["maxFailedTrialCount"] = 1
    if max_trials is None:
        del spec["maxTrialCount"]
    return exp


def ints(name: str, low: int, high: int, step: int | None = None) -> dict[str, Any]:
    space = {"min": str(low), "max": str(high)} | ({"step": str(step)} if step else {})
    return {"name": name, "parameterType": "int", "feasibleSpace": space}


def doubles(name: str, low: str, high: str, step: str | None) -> dict[str, Any]:
    space = {"min": low, "max": high} | ({"step": step} if step else {})
    return {"name": name, "parameterType": "double", "feasibleSpace": space}


def listed(name: str, kind: str, *values: str) -> dict[str, Any]:
    return {"name": name, "parameterType": kind, "feasibleSpace": {"list": list(values)}}


# Each kind twice, none only first: 3 x 3 x 2 x 3 x 2 x 3 combinations.
MIXED_GRID = (
    doubles("a", "0.1", "0.7", "0.2"),  # 0.1 0.3 0.5: Katib's 0.7000000000000001 is above 0.7
    ints("b", 1, 5, 2),  # 1 3 5
    listed("c", "discrete", "32", "64"),
    ints("d", 0, 2),  # 0 1 2: step 1 when none is given
    listed("e", "categorical", "sgd", "adam"),
    doubles("f", "0", "1", "0.5"),  # 0 0.5 1
)


def test_a_grid_of_exactly_its_combinations_passes_and_one_trial_more_is_refused() -> None:
    size = 3 * 3 * 2 * 3 * 2 * 3
    check_experiment(grid(*MIXED_GRID, max_trials=size))
    check_experiment(grid(*MIXED_GRID, max_trials=None))
    assert refusal(grid(*MIXED_GRID, max_trials=size + 1)) == (
        f"spec.maxTrialCount={size + 1}: grid: Max Trial Count > all possible search "
        f"combinations: {size} (run time)"
    )


def katibs_count(low: str, high: str, step: str) -> int:
    """Katib's grid service: `np.arange(min, max + step, step)`, a last point above max dropped."""
    points = np.arange(float(low), float(high) + float(step), float(step))
    return len(points) - int(len(points) > 0 and points[-1] > float(high))


DOUBLES = [
    (low, high, step)
    for low in ("0", "0.1", "-1")
    for high in ("0.5", "0.7", "1.3")
    for step in ("0.1", "0.2", "0.05")
]


@pytest.mark.parametrize(("low", "high", "step"), DOUBLES)
def test_the_grid_counts_a_doubles_points_as_katibs_service_does(
    low: str, high: str, step: str
) -> None:
    """0.1 to 0.5 by 0.2 is 2 points there (0.5000000000000001 is above 0.5), not 3."""
    size = katibs_count(low, high, step)
    check_experiment(grid(doubles("x", low, high, step), max_trials=size))
    assert refusal(grid(doubles("x", low, high, step), max_trials=size + 1)).endswith(
        f"combinations: {size} (run time)"
    )


@pytest.mark.parametrize(
    ("parameter", "size"),
    [(ints("n", 1, 3), 3), (ints("n", 2, 10, 4), 3), (ints("n", 2, 11, 4), 3)],
)
def test_the_grid_counts_an_integers_points_as_pythons_range(
    parameter: dict[str, Any], size: int
) -> None:
    check_experiment(grid(parameter, max_trials=size))
    assert refusal(grid(parameter, max_trials=size + 1)).endswith(
        f"combinations: {size} (run time)"
    )


@pytest.mark.parametrize(
    ("parameter", "shown"),
    [(ints("n", 1, 3, 0), "'0'"), (doubles("n", "0.1", "0.5", "-0.1"), "'-0.1'")],
)
def test_a_grid_step_that_is_not_positive_is_refused_not_crashed_on(
    parameter: dict[str, Any], shown: str
) -> None:
    parameter["feasibleSpace"]["step"] = shown.strip("'")
    assert refusal(grid(parameter, max_trials=1)) == (
        f"spec.parameters[0].feasibleSpace.step={shown}: grid: parameter n step must be positive"
    )


def test_a_grid_parameter_with_its_bounds_swapped_has_no_point_so_no_trial_count_passes() -> None:
    for swapped in (doubles("x", "0.5", "0.1", "0.1"), ints("x", 5, 1)):
        assert refusal(grid(swapped, max_trials=1)) == (
            "spec.maxTrialCount=1: grid: Max Trial Count > all possible search combinations: 0 "
            "(run time)"
        )


def test_a_grid_double_without_a_step_is_refused_naming_it() -> None:
    assert refusal(grid(ints("n", 1, 3), doubles("lr", "0.1", "0.5", None), max_trials=3)) == (
        "spec.parameters[1].feasibleSpace.step: grid: parameter lr step is nil (run time: every "
        "double needs a step for grid search)"
    )
