"""Targets: one package per executor of the same pipeline (`local`, `vertex`, `kubeflow`).

A target's `binding` module says what runs its tune, train_final and register
steps; its other modules are the clients it needs (runs, schedules, lookups).
"""

from __future__ import annotations

import importlib

from pipelines.targets.base import Binding

TARGETS = ("local", "vertex", "kubeflow")


def binding_for(target: str) -> Binding:
    """The `Binding` of `target`.

    Raises:
        ValueError: Unknown target (one line naming it and the known ones).
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {', '.join(TARGETS)}")
    return importlib.import_module(f"pipelines.targets.{target}.binding").BINDING
