"""The search space a Vertex study payload describes: the inverse of its serialization.

The local study and the Katib Experiment receive `study_spec_parameters` /
`study_spec_metrics` as Vertex would, and read them back into a `SearchSpace` here,
strictly (as the API's `StudySpec` messages, `pipelines.vertex_types`: unknown fields
are refused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines import vertex_types
from pipelines.payloads import payload_items
from pipelines.study.search_space import (
    SCALE_TYPE_NAMES,
    Metric,
    Parameter,
    SearchSpace,
    SearchSpaceError,
    Value,
)
from trainer.contract import GOALS


def parse_study_spec_parameters(
    study_spec_parameters: Sequence[Mapping[str, Any] | str],
) -> tuple[Parameter, ...]:
    """The inverse of `to_study_spec_parameters` (strict: unknown fields are refused)."""
    out = []
    for item in payload_items(study_spec_parameters):
        try:
            spec = vertex_types.parse("StudySpec.ParameterSpec", item)
        except Exception as err:  # json_format.ParseError and friends
            detail = " ".join(str(err).split())
            raise SearchSpaceError(f"study_spec_parameters: {detail}") from None
        out.append(_parameter_from_proto(spec, parent_values=()))
    return tuple(out)


def _parameter_from_proto(spec: Any, parent_values: tuple[Value, ...]) -> Parameter:
    kind = spec.WhichOneof("parameter_value_spec")
    scale_name = vertex_types.enum_name(spec, "scale_type")
    scale = next((k for k, v in SCALE_TYPE_NAMES.items() if v == scale_name), None)
    fields: dict[str, Any] = {}
    if kind == "double_value_spec":
        fields = {"type": "double", "min": spec.double_value_spec.min_value}
        fields["max"] = spec.double_value_spec.max_value
    elif kind == "integer_value_spec":
        fields = {"type": "integer", "min": spec.integer_value_spec.min_value}
        fields["max"] = spec.integer_value_spec.max_value
    elif kind == "discrete_value_spec":
        values = [float(v) for v in spec.discrete_value_spec.values]
        fields = {
            "type": "discrete",
            "values": tuple(int(v) if v.is_integer() else v for v in values),
        }
    elif kind == "categorical_value_spec":
        fields = {"type": "categorical", "values": tuple(spec.categorical_value_spec.values)}
        scale = None
    else:
        raise SearchSpaceError(f"parameter {spec.parameter_id!r}: no value spec")
    children = []
    for cond in spec.conditional_parameter_specs:
        which = cond.WhichOneof("parent_value_condition")
        raw = list(getattr(cond, which).values) if which else []
        parents: tuple[Value, ...]
        if which == "parent_categorical_values":
            parents = tuple(str(v) for v in raw)
        else:  # int or discrete: numbers, integral ones as ints
            parents = tuple(int(v) if float(v).is_integer() else float(v) for v in raw)
        children.append(_parameter_from_proto(cond.parameter_spec, parent_values=parents))
    return Parameter(
        parameter_id=spec.parameter_id,
        scale=scale,
        parent_values=parent_values,
        conditional=tuple(children),
        **fields,
    )


def parse_study_spec_metrics(
    study_spec_metrics: Sequence[Mapping[str, Any] | str],
) -> tuple[Metric, ...]:
    """The inverse of `to_study_spec_metrics` (goal as enum int or name)."""
    out = []
    for item in payload_items(study_spec_metrics):
        try:
            spec = vertex_types.parse("StudySpec.MetricSpec", item)
        except Exception as err:
            detail = " ".join(str(err).split())
            raise SearchSpaceError(f"study_spec_metrics: {detail}") from None
        goal = vertex_types.enum_name(spec, "goal").lower()
        if goal not in GOALS:
            raise SearchSpaceError(f"metric {spec.metric_id!r}: goal must be MAXIMIZE or MINIMIZE")
        out.append(Metric(spec.metric_id, goal))
    return tuple(out)


def from_study_spec(
    study_spec_parameters: Sequence[Mapping[str, Any] | str],
    study_spec_metrics: Sequence[Mapping[str, Any] | str],
) -> SearchSpace:
    """The (validated) space a `HyperparameterTuningJobRunOp` payload describes."""
    return SearchSpace(
        parameters=parse_study_spec_parameters(study_spec_parameters),
        metrics=parse_study_spec_metrics(study_spec_metrics),
    )


def same_study(spec: Mapping[str, Any], space: SearchSpace, algorithm: str, selection: str) -> bool:
    """Whether a saved study spec (`study.json`'s `studySpec`) is the study asked for."""
    try:
        saved = from_study_spec(spec.get("parameters", []), spec.get("metrics", []))
    except SearchSpaceError:
        return False
    return (
        saved == space
        and spec.get("algorithm") == algorithm
        and spec.get("measurementSelectionType") == selection
    )
