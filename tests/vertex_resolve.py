"""Resolve a compiled Vertex pipeline spec's task inputs the way the Vertex backend does.

Walks the DAG (sub-DAGs of `dsl.If` included), binds every task input from a
constant, the enclosing component's inputs or an upstream task's outputs, and
renders `{{$.inputs.parameters['x']}}` placeholders in executor args the way the
backend substitutes parameters: strings as they are, booleans `true`/`false`,
numbers and lists/dicts as JSON with whole numbers written as integers (the
backend marshals its struct values with protojson, which writes 1.0 as 1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def render(value: Any) -> str:
    """A parameter value as the backend writes it into a container argument."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(_integral(value))


def resolve_inputs(
    spec: Mapping[str, Any],
    outputs: Mapping[str, Mapping[str, Any]],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each executable task's resolved parameter inputs, by task name (both branches walked).

    Args:
        spec: The compiled pipeline spec.
        outputs: Output parameters by producer task name (e.g. from a local run).
        overrides: Root parameter values (the pipeline's defaults otherwise).
    """
    components = spec["components"]
    root_defaults = {
        name: p.get("defaultValue")
        for name, p in spec["root"]["inputDefinitions"]["parameters"].items()
    }
    scope0 = {**root_defaults, **(overrides or {})}
    resolved: dict[str, dict[str, Any]] = {}

    def walk(dag: Mapping[str, Any], scope: Mapping[str, Any]) -> None:
        for task_name, task in dag.get("tasks", {}).items():
            component = components[task["componentRef"]["name"]]
            values = {
                name: p["defaultValue"]
                for name, p in component.get("inputDefinitions", {}).get("parameters", {}).items()
                if "defaultValue" in p
            }
            for name, binding in task.get("inputs", {}).get("parameters", {}).items():
                if "runtimeValue" in binding:
                    values[name] = binding["runtimeValue"]["constant"]
                elif "componentInputParameter" in binding:
                    values[name] = scope.get(binding["componentInputParameter"])
                elif "taskOutputParameter" in binding:
                    ref = binding["taskOutputParameter"]
                    values[name] = outputs.get(ref["producerTask"], {}).get(
                        ref["outputParameterKey"]
                    )
            if "dag" in component:
                walk(component["dag"], values)
            else:
                resolved[task_name] = values

    walk(spec["root"]["dag"], scope0)
    return resolved


def executor_args(spec: Mapping[str, Any], task: str, inputs: Mapping[str, Any]) -> list[str]:
    """A task's container args with its parameter placeholders filled (IfPresent left out)."""
    component = _component_of(spec, task)
    executor = spec["deploymentSpec"]["executors"][component["executorLabel"]]
    args: list[str] = []
    for arg in executor["container"]["args"]:
        if arg.startswith('{"Concat"'):
            arg = "".join(json.loads(arg)["Concat"])
        elif arg.startswith('{"IfPresent"'):
            continue
        args.append(_PLACEHOLDER.sub(lambda m: render(inputs.get(m[1], "")), arg))
    return args


def _component_of(spec: Mapping[str, Any], task: str) -> Mapping[str, Any]:
    components = spec["components"]

    def find(dag: Mapping[str, Any]) -> Mapping[str, Any] | None:
        for name, t in dag.get("tasks", {}).items():
            component = components[t["componentRef"]["name"]]
            if name == task and "dag" not in component:
                return component
            if "dag" in component and (found := find(component["dag"])):
                return found
        return None

    found = find(spec["root"]["dag"])
    assert found is not None, f"no task {task!r}"
    return found


def flag(args: list[str], name: str) -> str:
    """The value after `name` in launcher args."""
    return args[args.index(name) + 1]


def capture_custom_job(monkeypatch: Any) -> dict[str, Any]:
    """Replace the API call of GCPC's custom-job launcher with a recorder.

    Returns:
        A dict whose `job` becomes the `aiplatform_v1` `CustomJob` the launcher would
        create (parsed from the dict it sends, as the client does) once it runs.
    """
    from google.cloud.aiplatform_v1.types import CustomJob
    from google_cloud_pipeline_components.container.v1.gcp_launcher import job_remote_runner

    sent: dict[str, Any] = {}

    class Client:
        def create_custom_job(self, parent: str, custom_job: Any) -> Any:
            sent["job"] = CustomJob(custom_job)  # what the client does with the dict
            return type("R", (), {"name": f"{parent}/customJobs/1"})()

    def init(self: Any, job_type: str, project: str, location: str, gcp_resources: str) -> None:
        self.job_type, self.project, self.location = job_type, project, location
        self.gcp_resources, self.job_client = gcp_resources, Client()
        self.job_uri_prefix = "https://x/v1/"

    monkeypatch.setattr(job_remote_runner.JobRemoteRunner, "__init__", init)
    monkeypatch.setattr(job_remote_runner.JobRemoteRunner, "poll_job", lambda *a: None)
    return sent
