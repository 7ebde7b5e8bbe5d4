"""A team's own model, by reference: `package.module:function`, inspected into a `ModelSpec`.

The function is `build(image_shape, num_classes, *, <hyperparameters>) -> keras.Model`
returning logits for images in [0, 1]. Its keyword-only arguments, each with a type
annotation (`int`, `float`, `str` or `Literal["a", "b"]`) and a default, are its tunable
hyperparameters, passed as `--<name>=<value>` like the trainer's own. A keyword-only
`weights` argument receives the `weights` setting; `input_dtype`, the dtype images
arrive in. An optional attribute `build.min_image_size` states the smallest side.

`python -m trainer.models.custom REF --image-size N` checks a reference in a process of
its own (the module may import TensorFlow; the pipeline's own process never does) and
prints its spec as JSON; exit 2 with one line when it is unusable, 3 when its module is
not importable here.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any

from trainer.contract import RUN_FLAGS, TRAINER_HYPERPARAMETERS, ContractError, Hyperparameter
from trainer.cost_metrics import BUILDER_METRICS_ATTRIBUTE
from trainer.models import ModelSpec

REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_]\w*$")
PASSED_THROUGH = ("weights", "input_dtype")  # keyword-only arguments that are not tuned
NOT_IMPORTABLE = 3  # the exit code when the module cannot be found here


class NotImportable(ContractError):
    """The reference's module is not on this machine's path (it may be in the trainer image)."""


def load_builder(reference: str) -> Callable[..., Any]:
    """The function a `package.module:function` reference names.

    Raises:
        NotImportable: Its module is not installed here.
        ContractError: Malformed, or the module has no such callable, or fails to import.
    """
    if not REFERENCE.match(reference):
        raise ContractError(f"model={reference!r}: expected package.module:function")
    module_name, function_name = reference.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise NotImportable(
                f"model={reference}: module {err.name} is not importable here "
                "(add its folder to PYTHONPATH)"
            ) from None
        raise ContractError(f"model={reference}: importing {module_name} failed ({err})") from None
    except Exception as err:  # the user's module raised while importing
        raise ContractError(
            f"model={reference}: importing {module_name} failed ({type(err).__name__}: {err})"
        ) from None
    builder = getattr(module, function_name, None)
    if not callable(builder):
        raise ContractError(f"model={reference}: {module_name} has no function {function_name}")
    return builder


def _hyperparameter(reference: str, name: str, hint: Any, default: Any) -> Hyperparameter:
    where = f"model={reference}: keyword-only argument {name}"
    if typing.get_origin(hint) is typing.Literal:
        choices = typing.get_args(hint)
        if not all(isinstance(c, str) for c in choices):
            raise ContractError(f"{where}: a Literal of strings is expected, got {hint}")
        spec = Hyperparameter(name, str, default, choices=tuple(choices), help=f"{reference}")
    elif hint in (int, float, str):
        spec = Hyperparameter(name, hint, default, help=f"{reference}")
    else:
        raise ContractError(
            f"{where}: annotation {getattr(hint, '__name__', hint)} is not tunable "
            "(expected int, float, str or Literal[...])"
        )
    if not spec.accepts(default):
        raise ContractError(f"{where}: default {default!r} is not {spec.expected}")
    return spec


def inspect_builder(reference: str) -> ModelSpec:
    """The spec of the builder `reference` names: its keyword-only hyperparameters.

    Raises:
        NotImportable: Its module is not installed here.
        ContractError: Not a builder this pipeline can tune, in one line.
    """
    builder = load_builder(reference)
    try:
        signature = inspect.signature(builder)
        hints = typing.get_type_hints(builder)
    except (TypeError, ValueError, NameError) as err:
        raise ContractError(f"model={reference}: cannot read its signature ({err})") from None
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(positional) != 2:
        raise ContractError(
            f"model={reference}: expected build(image_shape, num_classes, *, hyperparameters), "
            f"got {len(positional)} required positional argument(s)"
        )
    hyperparameters = []
    for p in signature.parameters.values():
        if p.kind is not p.KEYWORD_ONLY or p.name in PASSED_THROUGH:
            continue
        if p.name in TRAINER_HYPERPARAMETERS or p.name in RUN_FLAGS:
            raise ContractError(
                f"model={reference}: keyword-only argument {p.name} clashes with the "
                f"trainer's own --{p.name} (rename it)"
            )
        if p.default is p.empty or p.name not in hints:
            raise ContractError(
                f"model={reference}: keyword-only argument {p.name} needs a type annotation "
                "and a default"
            )
        hyperparameters.append(_hyperparameter(reference, p.name, hints[p.name], p.default))
    keywords = {p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY}
    return ModelSpec(
        name=reference,
        builder=reference,
        hyperparameters=tuple(hyperparameters),
        min_image_size=int(getattr(builder, "min_image_size", 1)),
        pretrained="weights" in keywords,
        typed_input="input_dtype" in keywords,
        description=(inspect.getdoc(builder) or reference).splitlines()[0],
        own_metrics=callable(getattr(builder, BUILDER_METRICS_ATTRIBUTE, None)),
    )


def check_builds(spec: ModelSpec, image_shape: Sequence[int], num_classes: int) -> None:
    """Build the model with its defaults and check it maps images to `num_classes` logits.

    Raises:
        ContractError: It fails to build, is not a keras.Model, or has the wrong output.
    """
    import keras

    from trainer.models import builder_of

    try:
        model = builder_of(spec)(tuple(image_shape), num_classes)
    except Exception as err:
        raise ContractError(
            f"model={spec.name}: building it for images {list(image_shape)} failed "
            f"({type(err).__name__}: {' '.join(str(err).split())[:200]})"
        ) from None
    if not isinstance(model, keras.Model):
        raise ContractError(
            f"model={spec.name}: returned {type(model).__name__}, expected a keras.Model"
        )
    outputs = getattr(model, "outputs", None)  # a subclassed model has none: not traced
    shape = tuple(outputs[0].shape) if outputs else ()
    if len(shape) != 2 or shape[-1] != num_classes:
        raise ContractError(
            f"model={spec.name}: output shape {shape}, expected (None, {num_classes}) logits"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Check a reference; print its spec as JSON (exit 0), or one line (exit 2, or 3)."""
    parser = argparse.ArgumentParser(prog="python -m trainer.models.custom")
    parser.add_argument("reference")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--channels", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        spec = inspect_builder(args.reference)
        check_builds(spec, (args.image_size, args.image_size, args.channels), 3)
    except NotImportable as err:
        print(err, file=sys.stderr)
        return NOT_IMPORTABLE
    except ContractError as err:
        print(err, file=sys.stderr)
        return 2
    print(json.dumps(spec.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
