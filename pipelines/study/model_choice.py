"""The model as a search parameter: a categorical `model`, each model's own parameters under it.

A space may list `model` (a top-level categorical parameter; values: catalogue names or
`package.module:function` builders). Every other top-level parameter applies to every
model in the choice, so each of them must take it; a model's own hyperparameters are
conditional children of `model` (`parent_values: [that model]`), checked against that
model only. Ids stay unique in the whole space (Vertex's rule): a hyperparameter several
models share (`num_units`) is one child listing them all, or a top-level parameter.
The trial's `--model=<value>` is its only `--model`: the fixed one is left out
(`components/job_specs.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from trainer.contract import TRAINER_HYPERPARAMETERS, Hyperparameter
from trainer.models import MODELS
from trainer.models.custom import REFERENCE

MODEL_PARAMETER = "model"
# A model's flags (the trainer's own and the model's) and whether they are known here.
ModelFlags = Callable[[str], tuple[Mapping[str, Hyperparameter], bool]]


class ModelChoiceError(ValueError):
    """A model choice the trainer cannot take; one line (`search_space` re-raises it as its own).

    This module works on `search_space`'s types without importing it (that module imports
    this one to check a space with a `model` parameter).
    """


def model_parameter(space: Any) -> Any:
    """The `SearchSpace`'s `model` parameter, None when it has none.

    Raises:
        ModelChoiceError: `model` is conditional, or not categorical, or names no model.
    """
    found = [p for p in space.all_parameters() if p.parameter_id == MODEL_PARAMETER]
    if not found:
        return None
    choice = found[0]
    name = f"parameter {MODEL_PARAMETER!r}"
    if choice not in space.parameters:
        raise ModelChoiceError(f"{name}: a model choice is a top-level parameter, not conditional")
    if choice.type != "categorical":
        raise ModelChoiceError(
            f"{name}: a {choice.type}, expected categorical (values: model names)"
        )
    for value in choice.values:
        if value not in MODELS and not REFERENCE.match(str(value)):
            raise ModelChoiceError(
                f"{name}: value {value!r} is not a model (expected one of "
                f"{', '.join(MODELS)} or package.module:function)"
            )
    return choice


def models_of(space: Any) -> tuple[str, ...]:
    """The models the space chooses among (empty: no `model` parameter)."""
    choice = model_parameter(space)
    return tuple(str(v) for v in choice.values) if choice else ()


def builtin_flags(model: str) -> tuple[Mapping[str, Hyperparameter], bool]:
    """A catalogued model's flags; a reference's own are unknown here (only the trainer's)."""
    if model in MODELS:
        return MODELS[model].all_hyperparameters(), True
    return TRAINER_HYPERPARAMETERS, False


def per_model(space: Any) -> dict[str, Any]:
    """For each model in the choice, the `SearchSpace` a trial of that model gets (no `model`)."""
    choice = model_parameter(space)
    assert choice is not None
    shared = tuple(p for p in space.parameters if p is not choice)
    return {
        str(m): dataclasses.replace(
            space,
            parameters=shared
            + tuple(dataclasses.replace(c, parent_values=()) for c in choice.active_children(m)),
        )
        for m in choice.values
    }


def check_per_model(
    space: Any, check: Callable[..., None], model_flags: ModelFlags | None = None
) -> None:
    """Every model in the choice must take every value the study can propose to it.

    Args:
        space: A `SearchSpace` with a `model` parameter.
        check: `search_space.check_against_trainer`, applied to each model's space.
        model_flags: Each model's flags (default: the catalogue's).

    Raises:
        ModelChoiceError: `model <name>: <what the trainer refuses>`, in one line.
    """
    flags_of = model_flags or builtin_flags
    for model, sub in per_model(space).items():
        flags, known = flags_of(model)
        try:
            check(sub, flags, open_ended=not known)
        except ValueError as err:
            raise ModelChoiceError(f"model {model}: {err}") from None
