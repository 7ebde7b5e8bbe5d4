"""Fakes of outside APIs take the real methods' parameters, so a misspelt keyword fails in tests.

Each fake method must exist on the real class, take its positional parameters in the
same order and only keywords the real method names (or swallows with `**kwargs`).
"""

from __future__ import annotations

import inspect

import pytest
from kubernetes.client import CustomObjectsApi
from model_registry import ModelRegistry

from tests.test_kubeflow_katib import FakeCustomObjects
from tests.test_kubeflow_register import FakeRegistry
from tests.test_kubeflow_tfjob import FakeApi

# (fake, real, whether the fake's constructor stands for the real one's)
FAKES = [
    (FakeRegistry, ModelRegistry, True),
    (FakeCustomObjects, CustomObjectsApi, False),  # built with the statuses to replay
    (FakeApi, CustomObjectsApi, False),
]
KINDS = inspect.Parameter


def mismatch(fake_method, real_method) -> list[str]:
    """How the fake's parameters differ from what the real method accepts."""
    fake = list(inspect.signature(fake_method).parameters.values())
    real = inspect.signature(real_method).parameters
    swallows = any(p.kind == KINDS.VAR_KEYWORD for p in real.values())
    positional = [p.name for p in real.values() if p.kind == KINDS.POSITIONAL_OR_KEYWORD]
    problems = []
    fake_positional = [p.name for p in fake if p.kind == KINDS.POSITIONAL_OR_KEYWORD]
    shared = fake_positional[: len(positional)]
    if shared != positional[: len(shared)]:
        problems.append(f"positional {fake_positional} != real {positional}")
    for p in fake:
        if p.kind == KINDS.VAR_KEYWORD and not swallows:
            problems.append(f"**{p.name}: the real method takes no arbitrary keywords")
        elif p.kind != KINDS.VAR_KEYWORD and p.name not in real and not swallows:
            problems.append(f"keyword {p.name!r}: not a parameter of the real method")
    return problems


@pytest.mark.parametrize(("fake", "real", "constructor"), FAKES, ids=[f[0].__name__ for f in FAKES])
def test_each_fake_method_takes_the_real_methods_parameters(fake, real, constructor):
    methods = [n for n, f in vars(fake).items() if inspect.isfunction(f) and not n.startswith("_")]
    assert methods
    for name in ["__init__", *methods] if constructor else methods:
        assert hasattr(real, name), f"{fake.__name__}.{name}: no such method on {real.__name__}"
        assert mismatch(getattr(fake, name), getattr(real, name)) == [], name


def test_the_check_catches_a_misspelt_keyword():
    def register_model(self, name, uri, *, model_format="", version=""):
        """A fake with a keyword the real method does not have."""

    assert mismatch(register_model, ModelRegistry.register_model) == [
        "keyword 'model_format': not a parameter of the real method"
    ]
