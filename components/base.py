"""The decorator every lightweight component uses.

On Vertex a component body runs in the project's components image (so it can
import project code); locally `kfp.local` runs it in this environment.
`install_kfp_package=False` because the image and the local venv already have kfp.

kfp's container command starts the body as a child of `sh -ec '...'`; dash (the
image's `sh`) does not hand over to its last command, so the SIGTERM a cancelled
run sends to the container's top process would reach `sh`, not Python, and a
step waiting on a cloud job or a Kubernetes object could never stop it.
`exec_python` makes the shell `exec` Python, as GCPC's own ops start Python
directly (`python3 -u -m ...launcher`). Every component gets it: no step does
anything in the shell after Python, and each then exits as its Python exits.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

from kfp import dsl

DEFAULT_COMPONENTS_IMAGE = "us-docker.pkg.dev/your-project/hpt-pipeline/components:latest"
# The line kfp 2.17 writes to start the body, and the same line with the shell replaced by Python
# (`env` sets the variable: POSIX leaves whether `VAR=x exec cmd` exports VAR unspecified).
KFP_START = "_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main"
EXEC_START = "exec env _KFP_RUNTIME=true python3 -m kfp.dsl.executor_main"


def components_image() -> str:
    """Image URI for component bodies (`HPT_COMPONENTS_IMAGE` overrides the default)."""
    return os.environ.get("HPT_COMPONENTS_IMAGE", DEFAULT_COMPONENTS_IMAGE)


def exec_python(component_op: Any) -> Any:
    """Make a lightweight component's shell `exec` its Python process (in place, idempotent).

    Then the process a cancelled run signals is Python itself, whose SIGTERM
    handlers stop the job it started.

    Raises:
        ValueError: The command is not the one kfp writes (a kfp upgrade changed it).
    """
    container = component_op.component_spec.implementation.container
    command = list(container.command)
    if command[:2] != ["sh", "-ec"] or len(command) < 3 or command[2].count(KFP_START) != 1:
        raise ValueError(f"{component_op.name}: not kfp's lightweight command ({KFP_START!r})")
    if EXEC_START in command[2]:
        return component_op
    command[2] = command[2].replace(KFP_START, EXEC_START)
    container.command = command
    return component_op


def component(func: Callable[..., Any]) -> Any:
    """`@dsl.component` with the project's base image, no kfp install step, Python `exec`ed."""
    return exec_python(
        dsl.component(func, base_image=components_image(), install_kfp_package=False)
    )


def with_image(component_op: Any, image: str) -> Any:
    """A copy of a lightweight component whose body runs in `image` (settings choose it)."""
    clone = copy.deepcopy(component_op)
    clone.component_spec.implementation.container.image = image
    return clone
