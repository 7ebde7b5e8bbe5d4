"""The wiring: which components run each target's tune, train_final and register steps.

One module per target (`local`, `vertex`, `kubeflow`), each a `Binding` that
`pipelines.pipeline` plugs into the one DAG. The wiring sits above the components;
the code their bodies run (clients, executors) is in `pipelines.targets`, below them.
"""

from __future__ import annotations

import importlib

from pipelines.wiring.base import Binding

TARGETS = ("local", "vertex", "kubeflow")


def binding_for(target: str) -> Binding:
    """The `Binding` of `target`.

    Raises:
        ValueError: Unknown target (one line naming it and the known ones).
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {', '.join(TARGETS)}")
    return importlib.import_module(f"pipelines.wiring.{target}").BINDING
