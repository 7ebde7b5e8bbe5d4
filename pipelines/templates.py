"""Compiled pipeline files, read the same way by every target: the spec and its parameters.

A compiled file is a `PipelineSpec` (or a Vertex `PipelineJob` wrapping one),
optionally followed by a second YAML document, the `PlatformSpec` that
kfp-kubernetes writes (volumes, secrets). `--param name=value` strings are typed
by the parameter types the spec declares.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines.settings import SettingsError, renamed


def read_documents(path: str | Path) -> list[Any]:
    """The YAML documents of a compiled pipeline file (one, or two with a platform spec).

    Raises:
        SettingsError: The file is missing or is not YAML.
    """
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"--template={path}: file not found")
    try:
        return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    except yaml.YAMLError as err:
        raise SettingsError(f"--template={path}: not YAML ({str(err).splitlines()[0]})") from None


def read_template(path: str | Path) -> dict[str, Any]:
    """The pipeline spec of a compiled pipeline file (a PipelineSpec or a PipelineJob).

    Raises:
        SettingsError: The file is missing or is not a compiled pipeline.
    """
    docs = read_documents(path)
    data = docs[0] if docs else None
    spec = data.get("pipelineSpec", data) if isinstance(data, dict) else None
    if not isinstance(spec, dict) or "pipelineInfo" not in spec or "root" not in spec:
        raise SettingsError(f"--template={path}: not a compiled pipeline (no pipelineInfo/root)")
    return spec


# The first line `compile` writes: the target the spec was compiled for (a YAML comment, so
# every reader of the spec ignores it; the golden tests' `normalize_spec` drops it).
TARGET_MARK = "# hpt-pipeline target: "


def recorded_target(path: str | Path, tune_tasks: Mapping[str, str]) -> str | None:
    """The target a compiled file was made for: its mark, else its tune step; None: unknown.

    `tune_tasks`: each target's tune task name → the target (`pipelines.wiring.tune_tasks`),
    which knows a spec without the mark (compiled before it existed).
    """
    text = Path(path).read_text()
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(TARGET_MARK):
            return line[len(TARGET_MARK) :].strip()
    tasks = read_template(path)["root"].get("dag", {}).get("tasks", {})
    found = {tune_tasks[t] for t in tasks if t in tune_tasks}
    return found.pop() if len(found) == 1 else None


def check_target(path: str | Path, target: str, tune_tasks: Mapping[str, str]) -> None:
    """Refuse a compiled file made for another target (its steps would call the wrong APIs).

    `tune_tasks`: as `recorded_target` takes it.

    Raises:
        SettingsError: Naming the file, its target and the command that makes the right one.
    """
    found = recorded_target(path, tune_tasks)
    if found is not None and found != target:
        raise SettingsError(
            f"--template={path}: compiled for --target {found}, not {target}; compile it with "
            f"`hpt-pipeline compile --target {target}` (or leave --template out)"
        )


def declared_parameters(spec: Mapping[str, Any]) -> dict[str, str]:
    """Pipeline parameter name → KFP parameter type (`NUMBER_INTEGER`, `STRING`, …)."""
    params = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    return {name: p.get("parameterType", "STRING") for name, p in params.items()}


def _parse_bool(raw: str) -> bool:
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ValueError(raw)


def _parse_json(kind: type) -> Any:
    def parse(raw: str) -> Any:
        value = json.loads(raw)
        if not isinstance(value, kind):
            raise ValueError(raw)
        return value

    return parse


# What each KFP parameter type expects, in words (for the one-line refusal).
_KIND_WORDS = {
    "NUMBER_INTEGER": "an integer",
    "NUMBER_DOUBLE": "a number",
    "STRING": "a string",
    "BOOLEAN": "true or false",
    "LIST": "a JSON list",
    "STRUCT": "a JSON object",
}
_PARAMETER_PARSERS = {
    "NUMBER_INTEGER": int,
    "NUMBER_DOUBLE": float,
    "STRING": str,
    "BOOLEAN": _parse_bool,
    "LIST": _parse_json(list),
    "STRUCT": _parse_json(dict),
}


def parameter_values(spec: Mapping[str, Any], assignments: Iterable[str]) -> dict[str, Any]:
    """Typed pipeline parameter values from `name=value` strings (JSON for lists and dicts).

    Raises:
        SettingsError: An assignment has no `=`, names no parameter of the pipeline,
            or its value does not parse as the parameter's type.
    """
    declared = declared_parameters(spec)
    values: dict[str, Any] = {}
    for item in assignments:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise SettingsError(f"--param {item!r}: expected name=value")
        if name not in declared and (refusal := renamed(name)):
            raise SettingsError(f"--param {refusal}")  # an old name, once a parameter
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise SettingsError(
                f"--param {name}: not a parameter of pipeline "
                f"{spec['pipelineInfo']['name']!r} (parameters: {known})"
            )
        kind = declared[name]
        try:
            values[name] = _PARAMETER_PARSERS.get(kind, str)(raw)
        except ValueError:
            expected = _KIND_WORDS.get(kind, kind)
            raise SettingsError(f"--param {name}={raw!r}: expected {expected}") from None
    return values
