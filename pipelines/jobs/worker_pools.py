"""Vertex job payloads: `worker_pool_specs` builders and strict checks against aiplatform_v1.

`training_worker_pool_specs` builds every job's pools, the final job's and each HPT
trial's (pool 0: the chief, one replica; pool 1: R workers, `workers` or
`trial_workers`); `trial_worker_pool_specs` is it without workers (the features job).
Keys are snake_case, as the API's proto-plus types want. `validate_worker_pool_specs`
parses payloads as the API's `WorkerPoolSpec` (`pipelines.vertex_types`) with unknown
fields refused, so a payload that runs locally is one Vertex accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs.machines import expected_gpus
from pipelines.payloads import PayloadError, refuse_camel_case, strict_parse
from trainer.contract import flag

DEFAULT_MACHINE_TYPE = "n1-standard-4"


def _machine_spec(machine_type: str, accelerator_type: str | None, accelerator_count: int) -> dict:
    if accelerator_count < 0:
        raise PayloadError(f"accelerator_count={accelerator_count}: expected >= 0")
    if accelerator_count and not accelerator_type:
        raise PayloadError(
            f"accelerator_count={accelerator_count} needs an accelerator_type "
            "(e.g. NVIDIA_TESLA_T4)"
        )
    spec: dict[str, Any] = {"machine_type": machine_type}
    if accelerator_count:
        spec["accelerator_type"] = accelerator_type
        spec["accelerator_count"] = accelerator_count
    return spec


def _pool(
    *,
    replica_count: int,
    image_uri: str,
    command: Sequence[str],
    args: Sequence[str],
    env: Mapping[str, str] | None,
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    expect_gpus: bool,
) -> dict[str, Any]:
    """One `WorkerPoolSpec` (a keyword per field it fills, as `training_worker_pool_specs`)."""
    container: dict[str, Any] = {"image_uri": image_uri, "command": list(command)}
    container["args"] = [str(a) for a in args]
    gpus = expected_gpus(accelerator_type, accelerator_count) if expect_gpus else 0
    if gpus:  # the trainer refuses to train on fewer (a container that cannot see the driver)
        container["args"].append(flag("expected_gpus", gpus))
    if env:
        container["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
    return {
        "machine_spec": _machine_spec(machine_type, accelerator_type, accelerator_count),
        "replica_count": replica_count,
        "container_spec": container,
    }


def trial_worker_pool_specs(
    *,
    image_uri: str,
    command: Sequence[str],
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    machine_type: str = DEFAULT_MACHINE_TYPE,
    accelerator_type: str | None = None,
    accelerator_count: int = 0,
    expect_gpus: bool = False,
) -> list[dict[str, Any]]:
    """A one-replica job's `worker_pool_specs` (the features job; a trial without workers).

    `training_worker_pool_specs` with no workers: HPT trials with `trial_workers` take that
    function directly, so a trial's pools and the final job's are built by one function.
    """
    return training_worker_pool_specs(
        image_uri=image_uri,
        command=command,
        args=args,
        env=env,
        machine_type=machine_type,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        expect_gpus=expect_gpus,
    )


def training_worker_pool_specs(
    *,
    image_uri: str,
    command: Sequence[str],
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    machine_type: str = DEFAULT_MACHINE_TYPE,
    accelerator_type: str | None = None,
    accelerator_count: int = 0,
    worker_count: int = 0,
    expect_gpus: bool = False,
) -> list[dict[str, Any]]:
    """A job's `worker_pool_specs`: pool 0 the chief, pool 1 `worker_count` workers.

    The final job's (`workers`) and every HPT trial's (`trial_workers`; HPT appends
    `--<param>=<value>` to each pool's args). One keyword per field of Vertex's
    `WorkerPoolSpec` it fills (the container's and the machine's), plus the pool sizes:
    the job spec components pass them by these names.

    Every replica runs the same container on the same machine; with `worker_count` = 0 the
    job is the chief alone.

    Args:
        image_uri: Trainer container image.
        command: Container command, e.g. `["python", "-m", "trainer.task"]`.
        args: Fixed arguments (a trial's tuned ones come after them).
        env: Extra environment variables.
        machine_type: Compute Engine machine type.
        accelerator_type: e.g. `NVIDIA_TESLA_T4` (required when `accelerator_count` > 0).
        accelerator_count: Accelerators per replica (MirroredStrategy over them).
        worker_count: Replicas of pool 1, besides the chief.
        expect_gpus: Cloud targets: GPUs are real, so the trainer gets `--expected_gpus`
            = `accelerator_count` for a GPU type. Locally the count means logical CPU
            devices and no GPU is expected (False).
    """
    if worker_count < 0:
        raise PayloadError(f"worker_count={worker_count}: expected >= 0")
    common = dict(
        image_uri=image_uri,
        command=command,
        args=args,
        env=env,
        machine_type=machine_type,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        expect_gpus=expect_gpus,
    )
    pools = [_pool(replica_count=1, **common)]  # type: ignore[arg-type]
    if worker_count:
        pools.append(_pool(replica_count=worker_count, **common))  # type: ignore[arg-type]
    return pools


def validate_worker_pool_specs(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> list[Any]:
    """Strictly parse each pool as the API's `WorkerPoolSpec` message.

    Empty pools (`{}`) stand for skipped pools, as Vertex allows after pool 0.
    Also checks what the API would: pool 0 exists with exactly one replica and a
    container or Python package, and snake_case keys.

    Returns:
        The parsed `WorkerPoolSpec` protobuf messages (empty ones included).

    Raises:
        PayloadError: naming the pool and the field.
    """
    if not worker_pool_specs:
        raise PayloadError("worker_pool_specs: empty, expected at least pool 0 (the chief)")
    if len(worker_pool_specs) > 4:
        raise PayloadError(
            f"worker_pool_specs: {len(worker_pool_specs)} pools, expected at most 4 "
            "(chief, workers, parameter servers, evaluator)"
        )
    parsed = []
    for index, raw in enumerate(worker_pool_specs):
        what = f"worker_pool_specs[{index}]"
        item = json.loads(raw) if isinstance(raw, str) else raw
        refuse_camel_case(item, what)
        spec = strict_parse("WorkerPoolSpec", item, what)
        if item:
            if not (spec.container_spec.image_uri or spec.python_package_spec.python_module):
                raise PayloadError(f"{what}: needs container_spec.image_uri or python_package_spec")
            if spec.replica_count < 1:
                raise PayloadError(f"{what}: replica_count={spec.replica_count}, expected >= 1")
        elif index == 0:
            raise PayloadError(f"{what}: pool 0 (the chief) cannot be empty")
        if index == 0 and spec.replica_count != 1:
            raise PayloadError(f"{what}: pool 0 is the chief, replica_count must be 1")
        parsed.append(spec)
    return parsed
