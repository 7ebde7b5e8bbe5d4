"""The Katib `Experiment` (kubeflow.org/v1beta1) built from the study payload every target gets.

The Vertex HPT job's inputs (GCPC's serialized study spec, trial counts, algorithm,
measurement selection, `worker_pool_specs`) are parsed back (`spec_reader.from_study_spec`)
and written through `kubeflow_katib_api`'s pydantic models and the `kubernetes` client
models, so the camelCase dict round-trips through both unchanged. The mapping: File
collector in JSON format (the trainer's hypertune lines as they are), Optuna's
`multivariate-tpe` for Vertex's default algorithm, `logUniform` for log scales, `medianstop`
for early stopping, the local failure floor for Vertex's 0, and `resumePolicy` FromVolume
only for a named `study_dir`.

Why each choice, with Katib's source lines: docs/kubeflow.md, "Katib, as its source behaves".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study.failure_rules import DEFAULT_FAILURE_FLOOR
from pipelines.study.options import (
    MEDIAN_STOP_MIN_TRIALS,
    MEDIAN_STOP_START_STEP,
    check_algorithm,
)
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.spec_reader import from_study_spec
from pipelines.targets.kubeflow.job_kind import TRAINJOB, trial_kind
from pipelines.targets.kubeflow.kube import jobset_longest_pod_name, jobset_name_room, stable_name
from pipelines.targets.kubeflow.trainjob import NODE, PATCHES
from pipelines.targets.kubeflow.trial_template import (
    JOB_FAILURE,
    JOB_SUCCESS,
    METRICS_FILE,
    PRIMARY_CONTAINER,
    TRIAL_ID_ENV,
    TRIAL_NAME_PARAMETER,
    KatibSpecError,
    TrialPods,
    trial_job,
)
from pipelines.targets.kubeflow.trial_trainjob import FAILURE as TRAINJOB_FAILURE
from pipelines.targets.kubeflow.trial_trainjob import PRIMARY_CONTAINER as TRAINJOB_PRIMARY
from pipelines.targets.kubeflow.trial_trainjob import (
    PRIMARY_POD_LABELS as TRAINJOB_PRIMARY_POD_LABELS,
)
from pipelines.targets.kubeflow.trial_trainjob import SUCCESS as TRAINJOB_SUCCESS
from pipelines.targets.kubeflow.trial_trainjob import trial_trainjob
from trainer.contract import format_value

GROUP = "kubeflow.org"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
EXPERIMENTS = "experiments"
TRIALS = "trials"
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"  # consts.LabelExperimentName, on every Trial
# On every trial pod (our trial template's): the tune step lists them to fail fast (pod_watch).
EXPERIMENT_POD_LABEL = "hpt-pipeline.dev/experiment"

# Vertex's default → Optuna's TPE (`katib_suggestions`: hyperopt's `tpe` repeats configurations)
ALGORITHMS = {
    "ALGORITHM_UNSPECIFIED": "multivariate-tpe",
    "GRID_SEARCH": "grid",
    "RANDOM_SEARCH": "random",
}
EARLY_STOPPING = "medianstop"
MEDIANSTOP_SETTINGS = {
    "min_trials_required": str(MEDIAN_STOP_MIN_TRIALS),
    "start_step": str(MEDIAN_STOP_START_STEP),
}
RESUME_POLICY = "FromVolume"  # a study folder the user names (`study_dir`): resumable
PER_RUN_POLICY = "Never"  # a per-run study folder: never resumed, so no PVC or suggestion pod kept
STRATEGIES = {"LAST_MEASUREMENT": "latest"}  # BEST_MEASUREMENT: by goal (below)
TYPES = {"double": "double", "integer": "int", "discrete": "discrete", "categorical": "categorical"}

SPEC_HASH_ANNOTATION = "hpt-pipeline/spec-sha256"
PART_OF = {"app.kubernetes.io/part-of": "hpt-pipeline"}  # what cleanup selects
EDITABLE = ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")  # validator.go l.137-141
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = 40  # Katib's webhook (validator.go l.84-92)
TRIAL_NAME_SUFFIX = "-abcdefgh"  # a Trial's name: the Experiment's + `-` + 8 random characters


def max_name_length(nodes: int) -> int:
    """The longest Experiment name whose trials' pods can be created, for `nodes` per trial.

    Katib's 40 (`validator.go` l.84-92); for TrainJob trials (`nodes` > 1) less, by JobSet's
    pod name rule (`kube.jobset_name_room`) on the trial's name, the Experiment's plus
    `-` and 8 random characters (`suggestionclient.go` l.177), which Katib gives the
    TrainJob and Trainer the JobSet.
    """
    if trial_kind(nodes) != TRAINJOB:
        return MAX_NAME
    return min(MAX_NAME, jobset_name_room(NODE, nodes) - len(TRIAL_NAME_SUFFIX))


def experiment_name(prefix: str, base_output_directory: str, nodes: int = 1) -> str:
    """A Katib-valid name (`max_name_length`), the same for the same study folder.

    The study folder is unique per run and task (or the user's stable `study_dir`), so a
    retried task, or a rerun on the same `study_dir`, finds its Experiment again.

    Args:
        prefix: Readable start, e.g. the display name (lowercased, other characters → `-`).
        base_output_directory: The study's output folder.
        nodes: Pods per trial (> 1: TrainJob trials, whose pod names JobSet limits).
    """
    head = max_name_length(nodes) - len("-hpt-") - 10  # stable_name's role and digest
    return stable_name(prefix, base_output_directory, "hpt", head)


def _parameter(p: Parameter) -> dict[str, Any]:
    name = f"parameter {p.parameter_id!r}"
    if p.conditional or p.parent_values:
        raise KatibSpecError(
            f"{name}: conditional parameters are not supported by Katib (kubeflow target); "
            "flatten the search space"
        )
    if p.scale == "reverse_log":
        raise KatibSpecError(
            f"{name}: scale reverse_log has no Katib distribution (uniform, logUniform, normal, "
            "logNormal); use linear or log"
        )
    space: dict[str, Any]
    if p.type in ("double", "integer"):
        cast = float if p.type == "double" else int
        space = {"min": format_value(cast(p.min)), "max": format_value(cast(p.max))}  # type: ignore[arg-type]
        space["distribution"] = "logUniform" if p.scale == "log" else "uniform"
    else:
        space = {"list": [format_value(v) for v in p.values]}
    return {"name": p.parameter_id, "parameterType": TYPES[p.type], "feasibleSpace": space}


def check_space(space: SearchSpace) -> None:
    """The search space is one Katib takes (what `build_experiment` refuses, checked alone).

    Raises:
        KatibSpecError: A conditional parameter, or a scale Katib has no distribution for.
    """
    for p in space.all_parameters():
        _parameter(p)


def objective_notes(metric_ids: Sequence[str]) -> list[str]:
    """One line when there are several objectives: Katib searches on the first alone.

    Its suggestion services read the objective metric only (`additionalMetricNames` are
    collected, not searched) and `currentOptimalTrial` ranks by it; the others count at
    selection (the Pareto pick), as on every target.
    """
    primary, *others = metric_ids
    if not others:
        return []
    return [
        f"objectives: Katib searches on {primary} only (its suggestion services ignore "
        f"additionalMetricNames; currentOptimalTrial ranks {primary} alone); the others "
        f"({', '.join(others)}) are collected and count only at selection (the Pareto pick)"
    ]


def _grid_size(space: SearchSpace) -> int:
    size = 1
    for p in space.parameters:
        size *= len(p.feasible_values())
    return size


@dataclasses.dataclass(frozen=True)
class StudyPayload:
    """The study as every target gets it (the Vertex HPT job's inputs, `study_inputs`)."""

    study_spec_parameters: Sequence[Mapping[str, Any] | str]
    study_spec_metrics: Sequence[Mapping[str, Any] | str]
    study_spec_algorithm: str
    study_spec_measurement_selection_type: str
    max_trial_count: int
    parallel_trial_count: int
    max_failed_trial_count: int
    early_stopping: bool = False

    def space(self) -> SearchSpace:
        """The search space and metrics, parsed back from the payload."""
        return from_study_spec(self.study_spec_parameters, self.study_spec_metrics)


def build_experiment(
    *,
    name: str,
    namespace: str,
    study: StudyPayload,
    pods: TrialPods,
    resume_policy: str = RESUME_POLICY,
    override_field: str = PATCHES,
) -> dict[str, Any]:
    """The Experiment as a dict, validated by Katib's models (see the module docstring).

    Args:
        name: The Experiment's name (`experiment_name`).
        namespace: Where it runs.
        study: The study payload.
        pods: The trial pool and where its pods run; `pods.nodes` > 1 makes each trial a
            TrainJob (`job_kind`, `trial_trainjob`), else a Job.
        resume_policy: FromVolume (a named `study_dir`: resumable) or Never (per run).
        override_field: A TrainJob trial's override field (the cluster's Trainer release).

    Raises:
        KatibSpecError: A study Katib cannot run (conditional parameters, reverse_log,
            unknown algorithm, more than one replica, an unsafe command word...).
        SearchSpaceError: A malformed study payload.
    """
    _check_name(name, pods.nodes)
    space = _checked_space(study)
    spec: dict[str, Any] = {
        **_trial_counts(study, space),
        "resumePolicy": resume_policy,
        "objective": _objective(space, study.study_spec_measurement_selection_type),
        "algorithm": {"algorithmName": ALGORITHMS[study.study_spec_algorithm]},
        "parameters": [_parameter(p) for p in space.all_parameters()],
        "metricsCollectorSpec": {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": METRICS_FILE, "kind": "File", "format": "JSON"}},
        },
        "trialTemplate": _trial_template(name, space, pods, override_field),
    }
    if study.early_stopping:
        spec["earlyStopping"] = {
            "algorithmName": EARLY_STOPPING,
            "algorithmSettings": [{"name": k, "value": v} for k, v in MEDIANSTOP_SETTINGS.items()],
        }
    body = {
        "apiVersion": API_VERSION,
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": spec,
    }
    out = round_trip(body)
    out["metadata"]["annotations"] = {SPEC_HASH_ANNOTATION: spec_hash(out)}
    return round_trip(out)


def _check_name(name: str, nodes: int) -> None:
    """Katib's name rule, and JobSet's on the trials' pods (`max_name_length`)."""
    if not _NAME.match(name) or len(name) > MAX_NAME:
        raise KatibSpecError(
            f"experiment name {name!r}: expected lower case letters, digits and '-', starting "
            f"with a letter, at most {MAX_NAME} characters (Katib's rule)"
        )
    if len(name) > max_name_length(nodes):
        pod = jobset_longest_pod_name(name + TRIAL_NAME_SUFFIX, NODE, 1, nodes)
        raise KatibSpecError(
            f"experiment name {name!r}: at most {max_name_length(nodes)} characters with "
            f"{nodes} nodes per trial: JobSet's webhook refuses a trial whose longest pod "
            f"name, {pod!r}, is over 63 characters"
        )


def _trial_counts(study: StudyPayload, space: SearchSpace) -> dict[str, int]:
    """The spec's trial counts: a grid caps the total, which caps the parallel and failed."""
    max_trials = int(study.max_trial_count)
    if study.study_spec_algorithm == "GRID_SEARCH":
        max_trials = min(max_trials, _grid_size(space))
    max_failed = int(study.max_failed_trial_count) or DEFAULT_FAILURE_FLOOR
    return {
        "maxTrialCount": max_trials,
        "parallelTrialCount": min(int(study.parallel_trial_count), max_trials),
        "maxFailedTrialCount": min(max_failed, max_trials),
    }


def _checked_space(study: StudyPayload) -> SearchSpace:
    """The payload's space, with the algorithm Katib runs it with and no reserved name."""
    space = study.space()
    if study.study_spec_algorithm not in ALGORITHMS:
        raise KatibSpecError(
            f"study_spec_algorithm={study.study_spec_algorithm!r}: "
            f"expected one of {', '.join(ALGORITHMS)}"
        )
    check_algorithm(space, study.study_spec_algorithm)
    if any(p.parameter_id == TRIAL_NAME_PARAMETER for p in space.parameters):
        raise KatibSpecError(f"parameter {TRIAL_NAME_PARAMETER!r}: the name is reserved")
    return space


def _objective(space: SearchSpace, selection: str) -> dict[str, Any]:
    """The first metric is Katib's objective, the others `additionalMetricNames`."""
    objective, *additional = space.metrics
    return {
        "type": objective.goal,
        "objectiveMetricName": objective.metric_id,
        "additionalMetricNames": [m.metric_id for m in additional] or None,
        "metricStrategies": [
            {"name": m.metric_id, "value": STRATEGIES.get(selection, _by_goal(m.goal))}
            for m in space.metrics
        ],
    }


def _trial_template(
    name: str, space: SearchSpace, pods: TrialPods, override_field: str
) -> dict[str, Any]:
    """The trial template: a Job, or a TrainJob for multi-node trials, with Katib's conditions."""
    labels = {EXPERIMENT_POD_LABEL: name}
    if trial_kind(pods.nodes) == TRAINJOB:
        job = trial_trainjob(pods, space, override_field=override_field, pod_labels=labels)
        primary: dict[str, Any] = {
            "primaryContainerName": TRAINJOB_PRIMARY,
            "primaryPodLabels": dict(TRAINJOB_PRIMARY_POD_LABELS),
            "successCondition": TRAINJOB_SUCCESS,
            "failureCondition": TRAINJOB_FAILURE,
        }
    else:
        job = trial_job(pods, space, pod_labels=labels)
        primary = {
            "primaryContainerName": PRIMARY_CONTAINER,
            "successCondition": JOB_SUCCESS,
            "failureCondition": JOB_FAILURE,
        }
    trial_parameters = [
        {"name": p.parameter_id, "reference": p.parameter_id, "description": f"--{p.parameter_id}"}
        for p in space.parameters
    ]
    trial_parameters.append(
        {
            "name": TRIAL_NAME_PARAMETER,
            "reference": "${trialSpec.Name}",
            "description": TRIAL_ID_ENV,
        }
    )
    return {
        "retain": True,  # keep finished trials' Jobs and pods: failed trials' logs stay
        **primary,
        "trialParameters": trial_parameters,
        "trialSpec": job,
    }


def _by_goal(goal: str) -> str:
    return "max" if goal == "maximize" else "min"


def spec_hash(experiment: Mapping[str, Any]) -> str:
    """A digest of the spec but its trial counts (the only fields Katib lets an edit change).

    A rerun reuses an Experiment only when the digests agree (`validator.go` l.137-141).
    """
    spec = {k: v for k, v in (experiment.get("spec") or {}).items() if k not in EDITABLE}
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def round_trip(experiment: Mapping[str, Any]) -> dict[str, Any]:
    """The Experiment through `V1beta1Experiment` and the kubernetes `ApiClient`, checked unchanged.

    Raises:
        KatibSpecError: The models refuse a field or drop one (an unknown or misspelt key).
    """
    from kubeflow_katib_api.models import V1beta1Experiment
    from kubernetes.client import ApiClient

    plain = _drop_none(json.loads(json.dumps(experiment)))
    try:
        model = V1beta1Experiment.from_dict(plain)
    except Exception as err:  # pydantic.ValidationError
        raise KatibSpecError(f"Experiment: {' '.join(str(err).split())}") from None
    assert model is not None
    out: dict[str, Any] = ApiClient().sanitize_for_serialization(model.to_dict())
    if out != plain:
        raise KatibSpecError(
            "Experiment: Katib's models dropped or changed a field: "
            f"{_first_difference(plain, out)}"
        )
    return out


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path or '.'}: {a!r} -> {b!r}"
