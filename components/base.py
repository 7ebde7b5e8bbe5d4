"""The decorator every lightweight component uses.

On Vertex a component body runs in the project's components image (so it can
import project code); locally `kfp.local` runs it in this environment.
`install_kfp_package=False` because the image and the local venv already have kfp.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

from kfp import dsl

DEFAULT_COMPONENTS_IMAGE = "us-docker.pkg.dev/your-project/hpt-pipeline/components:latest"


def components_image() -> str:
    """Image URI for component bodies (`HPT_COMPONENTS_IMAGE` overrides the default)."""
    return os.environ.get("HPT_COMPONENTS_IMAGE", DEFAULT_COMPONENTS_IMAGE)


def component(func: Callable[..., Any]) -> Any:
    """`@dsl.component` with the project's base image and no kfp install step."""
    return dsl.component(func, base_image=components_image(), install_kfp_package=False)


def with_image(component_op: Any, image: str) -> Any:
    """A copy of a lightweight component whose body runs in `image` (settings choose it)."""
    clone = copy.deepcopy(component_op)
    clone.component_spec.implementation.container.image = image
    return clone
