"""The search space: one definition → Vertex `study_spec_parameters` / `study_spec_metrics`.

A space is a tuple of `Parameter`s (double, integer, discrete, categorical; scales
linear, log, reverse_log; conditional children under integer, discrete and
categorical parents) and the metrics to optimise. It is written once, in code
(`default_search_space`) or YAML (`load_search_space`, see `presets/seeds.yaml`),
validated with one-line `SearchSpaceError`s, serialized to exactly what GCPC's
`serialize_parameters` / `serialize_metrics` give for aiplatform's
`hyperparameter_tuning` spec classes (tests hold the two equal, key order
included), and parsed back from those payloads by the local study executor.
The serialization is written here because GCPC's helpers import the whole
aiplatform SDK: 2-3 s added to every `hpt-pipeline run` and `compile`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.study import model_choice
from trainer.contract import DEFAULT_METRIC_TAG, GOALS, Hyperparameter
from trainer.models import model_spec

PARAMETER_TYPES = ("double", "integer", "discrete", "categorical")
SCALES = ("linear", "log", "reverse_log")
# Parent types Vertex can condition on (ConditionalParameterSpec.parent_*_values).
CONDITIONAL_PARENT_TYPES = ("integer", "discrete", "categorical")
# aiplatform_v1 StudySpec.ParameterSpec.ScaleType names ↔ our scale names.
SCALE_TYPE_NAMES = {
    "linear": "UNIT_LINEAR_SCALE",
    "log": "UNIT_LOG_SCALE",
    "reverse_log": "UNIT_REVERSE_LOG_SCALE",
}
# Their enum numbers (None: SCALE_TYPE_UNSPECIFIED) and MetricSpec.GoalType's, as in payloads.
SCALE_TYPE_NUMBERS = {None: 0, "linear": 1, "log": 2, "reverse_log": 3}
GOAL_NUMBERS = {"maximize": 1, "minimize": 2}
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PARAMETER_KEYS = ("id", "type", "min", "max", "values", "scale", "parent_values", "conditional")

Value = float | int | str
PRESETS_DIR = Path(__file__).parent / "presets"
DEFAULT_PRESET = "default"


class SearchSpaceError(ValueError):
    """A bad search space; the message is one line naming the parameter and what is expected."""


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One hyperparameter, passed to the trainer as `--<parameter_id>=<value>`.

    Attributes:
        parameter_id: Flag name; unique in the whole space, conditional children included.
        type: One of `PARAMETER_TYPES`.
        min: Inclusive lower bound (double, integer).
        max: Inclusive upper bound (double, integer).
        values: Feasible values (discrete: numbers, categorical: strings).
        scale: `linear`, `log`, `reverse_log`, or None (unspecified; required for categorical).
        parent_values: For a conditional child: the parent values that make it active.
        conditional: Children active only for some values of this parameter.
    """

    parameter_id: str
    type: str
    min: float | None = None
    max: float | None = None
    values: tuple[Value, ...] = ()
    scale: str | None = None
    parent_values: tuple[Value, ...] = ()
    conditional: tuple[Parameter, ...] = ()

    def feasible_values(self) -> tuple[Value, ...]:
        """Every value of an integer, discrete or categorical parameter (grid search)."""
        if self.type == "integer":
            return tuple(range(int(self.min or 0), int(self.max or 0) + 1))
        if self.type in ("discrete", "categorical"):
            return self.values
        raise SearchSpaceError(
            f"parameter {self.parameter_id!r}: a double has no finite set of values "
            "(grid search needs integer, discrete or categorical parameters)"
        )

    def active_children(self, value: Value) -> tuple[Parameter, ...]:
        """The conditional children that apply when this parameter takes `value`."""
        return tuple(c for c in self.conditional if any(_same(value, v) for v in c.parent_values))

    def cast(self, value: Any) -> Value:
        """A payload value (JSON numbers may arrive as floats) in this parameter's type."""
        if self.type == "categorical":
            return str(value)
        if self.type == "integer" or (self.type == "discrete" and float(value).is_integer()):
            return int(round(float(value)))
        return float(value)


@dataclasses.dataclass(frozen=True)
class Metric:
    """A metric the trainer reports through hypertune, and its goal."""

    metric_id: str
    goal: str = "maximize"


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """Parameters (top level; conditional ones nested under their parents) and metrics."""

    parameters: tuple[Parameter, ...]
    metrics: tuple[Metric, ...] = (Metric(DEFAULT_METRIC_TAG, "maximize"),)

    def __post_init__(self) -> None:
        validate(self)

    def all_parameters(self) -> Iterator[Parameter]:
        """Every parameter, conditional children included (depth first)."""
        yield from _walk(self.parameters)

    def to_study_spec_parameters(self) -> list[dict[str, Any]]:
        """`study_spec_parameters` for `HyperparameterTuningJobRunOp`, as GCPC serializes them."""
        return [_parameter_spec(p) for p in self.parameters]

    def to_study_spec_metrics(self) -> list[dict[str, Any]]:
        """`study_spec_metrics` for `HyperparameterTuningJobRunOp`, as GCPC serializes them."""
        return study_spec_metrics(self.metrics)


def study_spec_metrics(metrics: Sequence[Metric]) -> list[dict[str, Any]]:
    """One `MetricSpec` per metric, in order, as GCPC's `serialize_metrics` gives them."""
    return [{"metric_id": m.metric_id, "goal": GOAL_NUMBERS[m.goal]} for m in metrics]


def default_search_space() -> SearchSpace:
    """The default space: the `DEFAULT_PRESET` preset."""
    return load_search_space(DEFAULT_PRESET)


# --- validation -------------------------------------------------------------------------------


def _walk(parameters: Sequence[Parameter]) -> Iterator[Parameter]:
    for p in parameters:
        yield p
        yield from _walk(p.conditional)


def _same(a: Value, b: Value) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return math.isclose(float(a), float(b), rel_tol=0, abs_tol=1e-10)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def validate(space: SearchSpace) -> None:
    """Raise `SearchSpaceError` for the first problem found in `space`."""
    if not space.parameters:
        raise SearchSpaceError("search space: no parameters (expected at least one)")
    seen: set[str] = set()
    for p in space.all_parameters():
        if p.parameter_id in seen:
            raise SearchSpaceError(
                f"parameter {p.parameter_id!r}: duplicate id (ids must be unique, "
                "conditional parameters included)"
            )
        seen.add(p.parameter_id)
        _validate_parameter(p)
    if not space.metrics:
        raise SearchSpaceError("search space: no metrics (expected at least one)")
    metric_ids = [m.metric_id for m in space.metrics]
    for m in space.metrics:
        if not m.metric_id:
            raise SearchSpaceError(
                "metric: empty id (expected the hypertune tag, e.g. val_accuracy)"
            )
        if metric_ids.count(m.metric_id) > 1:
            raise SearchSpaceError(f"metric {m.metric_id!r}: duplicate id")
        if m.goal not in GOALS:
            raise SearchSpaceError(
                f"metric {m.metric_id!r}: unknown goal {m.goal!r}, "
                f"expected one of {', '.join(GOALS)}"
            )


def _validate_parameter(p: Parameter) -> None:
    name = f"parameter {p.parameter_id!r}"
    if not isinstance(p.parameter_id, str) or not _ID.match(p.parameter_id):
        raise SearchSpaceError(
            f"{name}: bad id, expected a flag name (a letter, then letters, digits, _ or -)"
        )
    if p.type not in PARAMETER_TYPES:
        raise SearchSpaceError(
            f"{name}: unknown type {p.type!r}, expected one of {', '.join(PARAMETER_TYPES)}"
        )
    if p.scale is not None and p.scale not in SCALES:
        raise SearchSpaceError(
            f"{name}: unknown scale {p.scale!r}, expected one of {', '.join(SCALES)}"
        )
    if p.type in ("double", "integer"):
        _validate_range(p, name)
    elif p.type == "discrete":
        _validate_discrete(p, name)
    else:
        if p.scale is not None:
            raise SearchSpaceError(f"{name}: categorical parameters take no scale")
        if not p.values:
            raise SearchSpaceError(f"{name}: empty values, expected a list of categories")
        if not all(isinstance(v, str) and v for v in p.values):
            raise SearchSpaceError(f"{name}: categorical values must be non-empty strings")
        if len(set(p.values)) != len(p.values):
            raise SearchSpaceError(f"{name}: duplicate values, expected distinct categories")
    if p.conditional and p.type not in CONDITIONAL_PARENT_TYPES:
        raise SearchSpaceError(
            f"{name}: a {p.type} cannot have conditional parameters, expected one of "
            f"{', '.join(CONDITIONAL_PARENT_TYPES)}"
        )
    for child in p.conditional:
        _validate_parent_values(p, child)


def _validate_range(p: Parameter, name: str) -> None:
    if p.values:
        raise SearchSpaceError(f"{name}: a {p.type} takes min and max, not values")
    if not (_is_number(p.min) and _is_number(p.max)):
        raise SearchSpaceError(f"{name}: a {p.type} needs numeric min and max")
    assert p.min is not None and p.max is not None
    if p.type == "integer" and not (float(p.min).is_integer() and float(p.max).is_integer()):
        raise SearchSpaceError(f"{name}: integer bounds must be whole numbers")
    if p.min >= p.max:
        raise SearchSpaceError(f"{name}: min ({p.min}) must be < max ({p.max})")
    if p.scale in ("log", "reverse_log") and p.min <= 0:
        raise SearchSpaceError(f"{name}: {p.scale} scale needs min > 0, got min={p.min}")


def _validate_discrete(p: Parameter, name: str) -> None:
    if p.min is not None or p.max is not None:
        raise SearchSpaceError(f"{name}: a discrete parameter takes values, not min/max")
    if not p.values:
        raise SearchSpaceError(f"{name}: empty values, expected a list of numbers")
    if not all(_is_number(v) for v in p.values):
        raise SearchSpaceError(f"{name}: discrete values must be numbers")
    ordered = sorted(float(v) for v in p.values)
    if any(b - a < 1e-10 for a, b in zip(ordered, ordered[1:], strict=False)):
        raise SearchSpaceError(f"{name}: duplicate values, expected distinct numbers")
    if p.scale in ("log", "reverse_log") and ordered[0] <= 0:
        raise SearchSpaceError(f"{name}: {p.scale} scale needs values > 0, got {ordered[0]}")


def _validate_parent_values(parent: Parameter, child: Parameter) -> None:
    name = f"parameter {child.parameter_id!r}"
    if not child.parent_values:
        raise SearchSpaceError(
            f"{name}: conditional on {parent.parameter_id!r} but no parent_values"
        )
    for v in child.parent_values:
        if parent.type == "integer":
            ok = _is_number(v) and float(v).is_integer() and parent.min <= v <= parent.max  # type: ignore[operator]
        else:
            ok = any(_same(v, allowed) for allowed in parent.values) and (
                isinstance(v, str) == (parent.type == "categorical")
            )
        if not ok:
            raise SearchSpaceError(
                f"{name}: parent value {v!r} is not a value of {parent.parameter_id!r}"
            )


# --- YAML / dict form ---------------------------------------------------------------------------


def from_dict(data: Mapping[str, Any]) -> SearchSpace:
    """A space from its YAML form.

    `parameters` is a list of `{id, type, min, max, values, scale, conditional}`
    mappings (children under `conditional` also carry `parent_values`).

    The metric is not part of a space file: it is the `metric_tag` setting (one place).
    """
    if not isinstance(data, Mapping):
        raise SearchSpaceError("search space: expected a mapping with parameters")
    if "metrics" in data:
        raise SearchSpaceError(
            "search space: `metrics` is not read from a space file; set metric_tag "
            "(and goal) in the settings instead"
        )
    unknown = sorted(set(data) - {"parameters"})
    if unknown:
        raise SearchSpaceError(
            f"search space: unknown key(s) {', '.join(unknown)}, expected parameters"
        )
    if not isinstance(data.get("parameters"), list):
        raise SearchSpaceError("search space: parameters must be a list of mappings")
    parameters = tuple(_parameter_from_dict(d, child=False) for d in data["parameters"])
    return SearchSpace(parameters=parameters)


def _parameter_from_dict(d: Any, *, child: bool) -> Parameter:
    if not isinstance(d, Mapping):
        raise SearchSpaceError(f"search space: expected a parameter mapping, got {d!r}")
    pid = d.get("id")
    name = f"parameter {pid!r}"
    unknown = sorted(set(d) - set(_PARAMETER_KEYS))
    if unknown:
        raise SearchSpaceError(
            f"{name}: unknown key(s) {', '.join(map(str, unknown))}, "
            f"expected {', '.join(_PARAMETER_KEYS)}"
        )
    if "parent_values" in d and not child:
        raise SearchSpaceError(f"{name}: parent_values is only for parameters under conditional")
    kind = d.get("type")
    if not isinstance(kind, str):
        raise SearchSpaceError(
            f"{name}: missing type, expected one of {', '.join(PARAMETER_TYPES)}"
        )
    scale = d.get("scale", "linear" if kind in ("double", "integer") else None)
    children = d.get("conditional") or []
    if not isinstance(children, list):
        raise SearchSpaceError(f"{name}: conditional must be a list of parameter mappings")
    for key in ("values", "parent_values"):
        if key in d and not isinstance(d[key], list):
            raise SearchSpaceError(f"{name}: {key} must be a list")
    return Parameter(
        parameter_id=pid if isinstance(pid, str) else str(pid),
        type=kind,
        min=d.get("min"),
        max=d.get("max"),
        values=tuple(d.get("values") or ()),
        scale=scale,
        parent_values=tuple(d.get("parent_values") or ()),
        conditional=tuple(_parameter_from_dict(c, child=True) for c in children),
    )


def preset_names() -> list[str]:
    """The packaged search spaces (`pipelines/study/presets/<name>.yaml`)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_search_space(
    name_or_path: str | None = None,
    hyperparameters: Mapping[str, Hyperparameter] | None = None,
    *,
    open_ended: bool = False,
    model_flags: Any = None,
) -> SearchSpace:
    """A preset by name (None: `DEFAULT_PRESET`) or a YAML file, checked against the trainer.

    Args:
        name_or_path: A preset name or a YAML file.
        hyperparameters: The flags the trainer takes for the chosen model (default: the
            default model's, `trainer.models.ModelSpec.all_hyperparameters`).
        open_ended: Ids that are not the trainer's own pass (a model whose own
            hyperparameters are not known here).
        model_flags: For a `model` parameter: each model's flags (`model_choice.ModelFlags`).

    Raises:
        SearchSpaceError: Unreadable, malformed, or proposing values the trainer refuses.
    """
    name_or_path = name_or_path or DEFAULT_PRESET
    path = PRESETS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        path = Path(name_or_path)
        if not path.suffix and not path.exists():
            raise SearchSpaceError(
                f"search_space={name_or_path!r}: expected a YAML file or a preset "
                f"({', '.join(preset_names())})"
            )
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SearchSpaceError(f"{path}: cannot read search space ({err.strerror})") from err
    except yaml.YAMLError as err:
        detail = " ".join(str(err).split())
        raise SearchSpaceError(f"{path}: not valid YAML ({detail})") from err
    if hyperparameters is None:
        hyperparameters = model_spec().all_hyperparameters()
    try:
        space = from_dict(data or {})
        check_against_trainer(
            space, hyperparameters, open_ended=open_ended, model_flags=model_flags
        )
    except SearchSpaceError as err:
        raise SearchSpaceError(f"{name_or_path}: {err}") from None
    return space


def check_against_trainer(
    space: SearchSpace,
    hyperparameters: Mapping[str, Hyperparameter],
    *,
    open_ended: bool = False,
    model_flags: Any = None,
) -> None:
    """Refuse a space the trainer cannot take: every value it can propose must be accepted.

    Each id must be one of `hyperparameters` (the trainer's own flags and the model's),
    integer flags take integer or discrete (whole-number) parameters, string flags
    categorical ones, and every bound, discrete value and category must be accepted,
    since the study may propose any of them.

    A space with a `model` parameter is checked model by model instead, each model's
    flags from `model_flags` (`pipelines.study.model_choice`).

    Raises:
        SearchSpaceError: Naming the parameter and what the trainer expects.
    """
    try:
        if model_choice.model_parameter(space) is not None:
            model_choice.check_per_model(space, check_against_trainer, model_flags)
            return
    except model_choice.ModelChoiceError as err:
        raise SearchSpaceError(str(err)) from None
    for p in space.all_parameters():
        name = f"parameter {p.parameter_id!r}"
        spec = hyperparameters.get(p.parameter_id)
        if spec is None:
            if open_ended:
                continue
            raise SearchSpaceError(
                f"{name}: the trainer has no flag --{p.parameter_id} "
                f"(expected one of {', '.join(hyperparameters)})"
            )
        numeric_flag = spec.kind is not str
        if (p.type == "categorical") == numeric_flag or (spec.kind is int and p.type == "double"):
            hint = {int: " (use type integer or discrete)", str: " (use type categorical)"}
            raise SearchSpaceError(
                f"{name}: a {p.type}, but --{p.parameter_id} takes {spec.expected}"
                + hint.get(spec.kind, "")
            )
        bounds = (("min", p.min), ("max", p.max)) if p.type in ("double", "integer") else ()
        values = tuple(("value", v) for v in p.values)
        for what, value in (*bounds, *values):
            if not spec.accepts(value if spec.kind is str else float(value)):  # type: ignore[arg-type]
                raise SearchSpaceError(
                    f"{name}: {what} {value} is refused by the trainer "
                    f"(--{p.parameter_id} takes {spec.expected})"
                )


# --- Vertex payloads ------------------------------------------------------------------------------


def _parameter_spec(p: Parameter) -> dict[str, Any]:
    """`p` as a `StudySpec.ParameterSpec` dict, as GCPC's `serialize_parameters` writes it.

    That is proto-plus `to_dict`: int64s as strings, enums as numbers, and in each
    message the fields set to a non-default value first, then the rest (`_to_dict_order`).
    """
    value_spec: tuple[str, dict[str, Any]]
    if p.type in ("double", "integer"):
        as_value = float if p.type == "double" else (lambda x: str(int(x)))  # int64 → string
        bounds = (("min_value", as_value(p.min)), ("max_value", as_value(p.max)))  # type: ignore[arg-type]
        value_spec = (f"{p.type}_value_spec", _to_dict_order(bounds))
    elif p.type == "discrete":
        value_spec = ("discrete_value_spec", {"values": sorted(float(v) for v in p.values)})
    else:
        value_spec = ("categorical_value_spec", {"values": [str(v) for v in p.values]})
    return _to_dict_order(
        (
            ("parameter_id", p.parameter_id),
            value_spec,
            ("scale_type", 0 if p.type == "categorical" else SCALE_TYPE_NUMBERS[p.scale]),
            ("conditional_parameter_specs", [_conditional_spec(c, p.type) for c in p.conditional]),
        )
    )


def _to_dict_order(fields: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Fields given in field-number order, reordered as `to_dict` writes them: set ones first."""
    return dict(sorted(fields, key=lambda field: field[1] in (0, "0", "", [])))


def _conditional_spec(child: Parameter, parent_type: str) -> dict[str, Any]:
    """A `ConditionalParameterSpec` dict: `child` and the parent values that activate it."""
    values: list[Any]
    if parent_type == "integer":
        key, values = "parent_int_values", [str(int(v)) for v in child.parent_values]
    elif parent_type == "discrete":
        key, values = "parent_discrete_values", [float(v) for v in child.parent_values]
    else:
        key, values = "parent_categorical_values", [str(v) for v in child.parent_values]
    return {"parameter_spec": _parameter_spec(child), key: {"values": values}}
