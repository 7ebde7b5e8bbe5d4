"""Katib's admission rules for an Experiment, checked before it is sent.

Katib's CRDs carry no schema: the rules live in its validating webhook
(`pkg/webhook/v1beta1/experiment/validator/validator.go`, github.com/kubeflow/katib; line
numbers below refer to it). They are restated here, in the webhook's order and with its
field paths and messages, so a bad Experiment is refused in one line without a cluster.
Run-time rules are added ("run time"): trial parameters, primary container, medianstop, grid,
tpe's repeats. Not modelled: docs/kubeflow.md, "Katib, as its source behaves".
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.targets.kubeflow.katib_suggestions import repeated_configurations

# manifests/v1beta1/installs/katib-standalone/katib-config.yaml: the suggestion and early
# stopping services a default install has (GetSuggestionConfigData, l.215-218).
ALGORITHM_NAMES = (
    "random",
    "tpe",
    "grid",
    "hyperband",
    "bayesianoptimization",
    "cmaes",
    "sobol",
    "multivariate-tpe",
    "enas",
    "darts",
    "pbt",
)
EARLY_STOPPING_NAMES = ("medianstop",)
RESUME_POLICIES = ("", "Never", "LongRunning", "FromVolume")  # l.241-252
PARAMETER_TYPES = ("int", "double", "categorical", "discrete", "unknown")  # l.259-263
DISTRIBUTIONS = ("uniform", "logUniform", "normal", "logNormal", "unknown")  # l.268-273
COLLECTOR_KINDS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "Custom", "Push")
# pkg/controller.v1beta1/consts/const.go
PARAM_PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
META_REFERENCE = re.compile(r"\$\{trialSpec\.(.+?)\}")
META_INDEXED = re.compile(r"(.+)\[(.+)]")
META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Annotations", "Labels")
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_TWO_GROUPS = re.compile(r".*\(.*\).*\(.*\).*")
_SOURCE = "spec.metricsCollectorSpec.source"  # the metrics collector's source, in messages


class KatibRuleError(ValueError):
    """An Experiment Katib's webhook (or controller) would refuse; one line."""


def _fail(path: str, value: Any, message: str) -> None:
    shown = f"={value!r}" if value is not None else ""
    raise KatibRuleError(f"{path}{shown}: {message}")


def check_experiment(experiment: Mapping[str, Any]) -> None:
    """Raise `KatibRuleError` for the first rule the Experiment breaks.

    Args:
        experiment: The Experiment as sent (camelCase dict).
    """
    name = str((experiment.get("metadata") or {}).get("name") or "")
    if not _NAME.match(name) or len(name) > 40:  # l.84-92
        _fail(
            "metadata.name",
            name,
            "must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, end with an alphanumeric character, at most 40 characters",
        )
    spec = experiment.get("spec") or {}
    _check_counts(spec)
    _check_objective(spec.get("objective"))
    _check_algorithm(spec.get("algorithm"))
    _check_early_stopping(spec.get("earlyStopping"))
    if spec.get("resumePolicy", "") not in RESUME_POLICIES:  # l.241-252
        _fail("spec.resumePolicy", spec.get("resumePolicy"), "invalid ResumePolicyType")
    _check_trial_template(spec)
    parameters = spec.get("parameters") or []
    if not parameters and spec.get("nasConfig") is None:  # l.162-164
        _fail("spec", None, "spec.parameters or spec.nasConfig must be specified")
    if parameters and spec.get("nasConfig") is not None:  # l.166-169
        _fail("spec", None, "only one of spec.parameters and spec.nasConfig can be specified")
    _check_parameters(parameters)
    _check_collector(spec.get("metricsCollectorSpec") or {})
    _check_run_time(spec)


def _check_counts(spec: Mapping[str, Any]) -> None:
    max_failed = spec.get("maxFailedTrialCount")
    max_trials = spec.get("maxTrialCount")
    parallel = spec.get("parallelTrialCount")
    if max_failed is not None and max_failed < 0:  # l.94-96
        _fail("spec.maxFailedTrialCount", max_failed, "should not be less than 0")
    if max_trials is not None and max_trials <= 0:  # l.97-99
        _fail("spec.maxTrialCount", max_trials, "must be greater than 0")
    if parallel is not None and parallel <= 0:  # l.100-102
        _fail("spec.parallelTrialCount", parallel, "must be greater than 0")
    if max_failed is not None and max_trials is not None and max_failed > max_trials:  # l.104-109
        _fail(
            "spec.maxFailedTrialCount",
            max_failed,
            "should be less than or equal to spec.maxTrialCount",
        )
    if parallel is not None and max_trials is not None and parallel > max_trials:  # l.110-115
        _fail(
            "spec.parallelTrialCount",
            parallel,
            "should be less than or equal to spec.maxTrialCount",
        )


def _check_objective(objective: Mapping[str, Any] | None) -> None:
    if objective is None:  # l.186-189
        _fail("spec.objective", None, "must be specified")
        return
    if objective.get("type") not in ("minimize", "maximize"):  # l.190-193
        _fail("spec.objective.type", objective.get("type"), "must be minimize or maximize")
    metric = objective.get("objectiveMetricName")
    if not metric:  # l.194-196
        _fail("spec.objective.objectiveMetricName", None, "must be specified")
    if metric in (objective.get("additionalMetricNames") or []):  # l.197-200
        _fail(
            "spec.objective.additionalMetricNames",
            objective.get("additionalMetricNames"),
            "should not contain spec.objective.objectiveMetricName",
        )


def _check_algorithm(algorithm: Mapping[str, Any] | None) -> None:
    if algorithm is None:  # l.207-210
        _fail("spec.algorithm", None, "must be specified")
        return
    name = algorithm.get("algorithmName") or ""
    if not name:  # l.211-213
        _fail("spec.algorithm.algorithmName", None, "must be specified")
    if name not in ALGORITHM_NAMES:  # l.215-218 (katib-config suggestions)
        _fail(
            "spec.algorithm.algorithmName",
            name,
            f"unable to get Suggestion config data for algorithm {name} "
            f"(a default install has {', '.join(ALGORITHM_NAMES)})",
        )


def _check_early_stopping(early: Mapping[str, Any] | None) -> None:
    if early is None:  # l.224-226
        return
    name = early.get("algorithmName") or ""
    if not name:  # l.229-231
        _fail("spec.earlyStopping.algorithmName", None, "must be specified")
    if name not in EARLY_STOPPING_NAMES:  # l.233-236
        _fail(
            "spec.earlyStopping.algorithmName",
            name,
            f"unable to get EarlyStopping config data for algorithm {name}",
        )


def is_meta_reference(reference: str) -> bool:
    """Whether a trial parameter refers to the Trial's metadata (`${trialSpec.Name}`…).

    l.576-593.
    """
    match = META_REFERENCE.search(reference)
    if not match:
        return False
    key = match.group(1)
    if key in META_KEYS:
        return True
    indexed = META_INDEXED.search(key)
    return bool(indexed) and indexed.group(1) in META_KEYS  # type: ignore[union-attr]


def template_text(trial_template: Mapping[str, Any]) -> str:
    """The trial template as Katib handles it: its JSON text (`GetTrialTemplate`)."""
    return json.dumps(trial_template.get("trialSpec") or {}, separators=(",", ":"))


def _check_trial_template(spec: Mapping[str, Any]) -> None:
    """Check the trial template's required fields, its parameters and the run spec it makes."""
    path = "spec.trialTemplate"
    template = spec.get("trialTemplate")
    if template is None:  # l.309-312
        _fail(path, None, "must be specified")
        return
    if not template.get("primaryContainerName"):  # l.315-317
        _fail(f"{path}.primaryContainerName", None, "must be specified")
    if not template.get("successCondition") or not template.get("failureCondition"):  # l.320
        _fail(path, None, "successCondition and failureCondition must be specified")
    if template.get("trialParameters") is None:  # l.325-327
        _fail(f"{path}.trialParameters", None, "must be specified")
    has_spec, has_map = template.get("trialSpec") is not None, template.get("configMap") is not None
    if not has_spec and not has_map:  # l.330-332
        _fail(
            path,
            None,
            "spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified",
        )
    if has_spec and has_map:  # l.335-337
        _fail(
            path,
            None,
            "only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap "
            "can be specified",
        )
    if has_map:  # the ConfigMap's template is not visible here
        return
    text = _substitute_trial_parameters(spec, template)
    _check_run_spec(json.loads(text))


def _substitute_trial_parameters(spec: Mapping[str, Any], template: Mapping[str, Any]) -> str:
    """Check each trial parameter and return the template's text with all of them filled in."""
    path = "spec.trialTemplate"
    text = template_text(template)
    names = {p.get("name") for p in spec.get("parameters") or []}
    seen_names: set[str] = set()
    seen_refs: set[str] = set()
    for i, parameter in enumerate(template["trialParameters"]):
        where = f"{path}.trialParameters[{i}]"
        name, ref = parameter.get("name") or "", parameter.get("reference") or ""
        if not name or not ref or "{" in name or "}" in name:  # l.364-369
            _fail(
                where,
                None,
                "name and reference must be specified and name must not contain '{' or '}'",
            )
        if name in seen_names:  # l.372-376
            _fail(
                f"{where}.name", name, "can't be duplicated in spec.trialTemplate.trialParameters"
            )
        if ref in seen_refs:  # l.378-382
            _fail(
                f"{where}.reference",
                ref,
                "can't be duplicated in spec.trialTemplate.trialParameters",
            )
        seen_names.add(name)
        seen_refs.add(ref)
        if names and not is_meta_reference(ref) and ref not in names:  # l.387-394
            _fail(f"{where}.reference", ref, "does not exist in spec.parameters")
        placeholder = "${trialParameters." + name + "}"
        if placeholder not in text:  # l.397-401
            _fail(f"{where}.name", name, "in spec.trialParameters not found in spec.trialTemplate")
        text = text.replace(placeholder, "test-value")  # l.403
    left = PARAM_PLACEHOLDER.findall(text)
    if left:  # l.407-412
        _fail(
            path,
            None,
            f"parameters: {left} in spec.trialTemplate not found in spec.trialParameters",
        )
    return text


def _check_run_spec(run_spec: Mapping[str, Any]) -> None:
    """Check the filled-in trial template: no name/namespace, an apiVersion and a kind."""
    path = "spec.trialTemplate"
    metadata = run_spec.get("metadata") or {}
    if metadata.get("name") or metadata.get("namespace"):  # l.422-424
        _fail(
            path, None, "metadata.name and metadata.namespace in spec.trialTemplate must be omitted"
        )
    if not run_spec.get("apiVersion") or not run_spec.get("kind"):  # l.427-429
        _fail(path, None, "APIVersion and Kind in spec.trialTemplate must be specified")


def _check_parameters(parameters: Sequence[Mapping[str, Any]]) -> None:
    for i, p in enumerate(parameters):
        where = f"spec.parameters[{i}]"
        kind = p.get("parameterType")
        if kind not in PARAMETER_TYPES:  # l.259-266
            _fail(f"{where}.parameterType", kind, f"parameterType: {kind} is not supported")
        space = p.get("feasibleSpace") or {}
        dist = space.get("distribution") or ""
        if dist and dist not in DISTRIBUTIONS:  # l.268-277
            _fail(
                f"{where}.feasibleSpace.distribution",
                dist,
                f"distribution: {dist} is not supported",
            )
        if not any(space.values()):  # l.279-281
            _fail(f"{where}.feasibleSpace", None, "feasibleSpace must be specified")
        if kind in ("double", "int"):
            if space.get("list"):  # l.284-287
                _fail(
                    f"{where}.feasibleSpace.list",
                    space["list"],
                    f"feasibleSpace.list is not supported for parameterType: {kind}",
                )
            if not space.get("max") or not space.get("min"):  # l.288-291
                _fail(
                    f"{where}.feasibleSpace.max",
                    None,
                    "feasibleSpace.max or feasibleSpace.min must be specified for "
                    f"parameterType: {kind}",
                )
        elif kind in ("categorical", "discrete"):
            if space.get("max") or space.get("min") or space.get("step"):  # l.293-297
                _fail(
                    f"{where}.feasibleSpace",
                    None,
                    "feasibleSpace .max, .min and .step is not supported for "
                    f"parameterType: {kind}",
                )


def _check_collector(mc: Mapping[str, Any]) -> None:
    """Check the metrics collector: its kind, the source that kind needs, and its filter."""
    kind = (mc.get("collector") or {}).get("kind") or "StdOut"  # defaulted to StdOut
    source = mc.get("source") or {}
    fs = source.get("fileSystemPath") or {}
    where = _SOURCE
    if kind not in COLLECTOR_KINDS:  # l.553-555
        _fail(
            "spec.metricsCollectorSpec.collector.kind",
            kind,
            f"invalid metrics collector kind: {kind}",
        )
    if kind == "File":  # l.505-520
        _check_file_source(source)
    elif kind == "TensorFlowEvent":  # l.521-530
        if fs.get("kind") != "Directory" or not str(fs.get("path", "")).startswith("/"):
            _fail(
                where,
                None,
                "directory path where tensorflow event files exist is required by "
                ".spec.metricsCollectorSpec.source.fileSystemPath.path",
            )
        if fs.get("format"):
            _fail(f"{where}.fileSystemPath.format", fs.get("format"), "must be empty")
    elif kind == "PrometheusMetric":  # l.531-540
        _check_prometheus_source(source, kind)
    elif kind == "Custom":  # l.541-552
        _check_custom_collector(mc, kind)
    _check_metrics_filter(source)


def _check_file_source(source: Mapping[str, Any]) -> None:
    """The File collector's source: an absolute file path, TEXT or JSON, no filter with JSON."""
    fs = source.get("fileSystemPath") or {}
    where = _SOURCE
    if fs.get("kind") != "File" or not str(fs.get("path", "")).startswith("/"):
        _fail(
            f"{where}.fileSystemPath.path",
            fs.get("path"),
            "file path where metrics file exists is required",
        )
    if fs.get("format") not in ("TEXT", "JSON"):
        _fail(
            f"{where}.fileSystemPath.format",
            fs.get("format"),
            "format of metrics file is required for metrics collector",
        )
    if fs.get("format") == "JSON" and source.get("filter") is not None:
        _fail(f"{where}.filter", None, "filter must be nil when format of metrics file is json")


def _check_prometheus_source(source: Mapping[str, Any], kind: str) -> None:
    """The PrometheusMetric collector's source: a positive port and an absolute path."""
    where = _SOURCE
    http = source.get("httpGet") or {}
    port = str(http.get("port", ""))
    if not port.isdigit() or int(port) <= 0:
        _fail(
            f"{where}.httpGet.port",
            port,
            f"must be a positive integer value for metrics collector kind: {kind}",
        )
    if not str(http.get("path", "")).startswith("/"):
        _fail(
            f"{where}.httpGet.path",
            http.get("path"),
            f"path is invalid for metrics collector kind: {kind}",
        )


def _check_custom_collector(mc: Mapping[str, Any], kind: str) -> None:
    """The Custom collector: a customCollector, and any file system path absolute and typed."""
    fs = (mc.get("source") or {}).get("fileSystemPath") or {}
    if not (mc.get("collector") or {}).get("customCollector"):
        _fail(
            "spec.metricsCollectorSpec.collector.customCollector",
            None,
            f"metrics collector kind: {kind} is required",
        )
    if fs and (
        not str(fs.get("path", "")).startswith("/") or fs.get("kind") not in ("Directory", "File")
    ):
        _fail(
            f"{_SOURCE}.fileSystemPath",
            None,
            ".spec.metricsCollectorSpec.source is invalid",
        )


def _check_metrics_filter(source: Mapping[str, Any]) -> None:
    """Each filter format must compile and have two top groups (l.557-571)."""
    where = f"{_SOURCE}.filter.metricsFormat"
    for fmt in (source.get("filter") or {}).get("metricsFormat") or []:
        try:
            re.compile(fmt)
        except re.error as err:
            _fail(where, fmt, f"invalid filter: {err}")
        if not _TWO_GROUPS.match(fmt):
            _fail(where, fmt, "two top subexpressions are required")


def _check_run_time(spec: Mapping[str, Any]) -> None:
    """Rules Katib enforces after admission (marked "run time" in the module docstring)."""
    template = spec.get("trialTemplate") or {}
    references = {p.get("reference") for p in template.get("trialParameters") or []}
    for i, p in enumerate(spec.get("parameters") or []):
        # manifest/generator.go l.185-189: every assignment needs a trial parameter.
        if p.get("name") not in references:
            _fail(
                f"spec.parameters[{i}].name",
                p.get("name"),
                "is not referenced by any spec.trialTemplate.trialParameters (run time: the "
                "trial cannot be generated)",
            )
    trial_spec = template.get("trialSpec") or {}
    pod = ((trial_spec.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c.get("name") for c in pod.get("containers") or []]
    primary = template.get("primaryContainerName")
    if trial_spec.get("kind") == "Job" and primary not in containers:
        # webhook/v1beta1/pod/utils.go l.195-196: errPrimaryContainerNotFound at pod creation.
        _fail(
            "spec.trialTemplate.primaryContainerName",
            primary,
            f"no such container in the trial Job (run time), containers: {containers}",
        )
    if (repeats := repeated_configurations(spec)) is not None:  # katib_suggestions
        _fail("spec.algorithm.algorithmName", spec["algorithm"]["algorithmName"], repeats)
    if (spec.get("algorithm") or {}).get("algorithmName") == "grid":
        _check_grid(spec)
    early = spec.get("earlyStopping") or {}
    for setting in early.get("algorithmSettings") or []:
        # earlystopping/v1beta1/medianstop/service.py l.93-118.
        name, value = setting.get("name"), str(setting.get("value"))
        minimum = {"min_trials_required": 1, "start_step": 1}.get(name)
        if minimum is None:
            _fail(
                "spec.earlyStopping.algorithmSettings",
                name,
                "unknown setting for algorithm medianstop",
            )
        if not value.lstrip("-").isdigit() or int(value) < minimum:  # type: ignore[operator]
            _fail(
                f"spec.earlyStopping.algorithmSettings[{name}]",
                value,
                f"must be an integer >= {minimum}",
            )


def _check_grid(spec: Mapping[str, Any]) -> None:
    """The grid service's own check (run time), `pkg/suggestion/v1beta1/optuna/service.py`.

    l.238-251 with `internal/search_space.py` l.49-74: a double needs a step; maxTrialCount
    must not exceed the number of combinations (0.1 to 0.7 by 0.2 is 0.1, 0.3, 0.5 there).
    """
    size = 1
    for i, p in enumerate(spec.get("parameters") or []):
        space = p.get("feasibleSpace") or {}
        where = f"spec.parameters[{i}].feasibleSpace.step"
        if p.get("parameterType") in ("int", "double") and float(space.get("step") or 1) <= 0:
            _fail(where, space["step"], f"grid: parameter {p.get('name')} step must be positive")
        if p.get("parameterType") == "int":
            size *= len(
                range(int(space["min"]), int(space["max"]) + 1, int(space.get("step") or 1))
            )
        elif p.get("parameterType") == "double":
            if not space.get("step"):
                _fail(
                    where,
                    None,
                    f"grid: parameter {p.get('name')} step is nil (run time: every double needs "
                    "a step for grid search)",
                )
            size *= _arange_points(*(float(space[k]) for k in ("min", "max", "step")))
        else:
            size *= len(space.get("list") or [])
    if int(spec.get("maxTrialCount") or 0) > size:
        _fail(
            "spec.maxTrialCount",
            spec.get("maxTrialCount"),
            f"grid: Max Trial Count > all possible search combinations: {size} (run time)",
        )


def _arange_points(low: float, high: float, step: float) -> int:
    """`numpy.arange(low, high + step, step)`'s length, less a last point above `high`."""
    # numpy: ceil((stop - start) / step) points, the i-th start + i * (start + step - start)
    count = math.ceil((high + step - low) / step)
    last = low + (count - 1) * ((low + step) - low)
    return max(count - (last > high), 0)
