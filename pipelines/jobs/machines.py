"""Which machine types take which GPUs, and how many, for Vertex custom training (one table).

Vertex accepts a `WorkerPoolSpec` whose machine and accelerator do not go together,
runs the whole HPT study, and refuses the final CustomJob only then. This table is
Vertex's own list of valid combinations, transcribed from `SOURCE`: a GPU machine
spec outside it is refused before anything is sent. Machine types without a GPU
(`accelerator_count` 0) are not enumerated: any is accepted, except the
accelerator-optimized types (a2, a3, a4, g2), which always come with their GPUs.
Standard library only: component bodies and the CLI import it.
"""

from __future__ import annotations

from collections.abc import Mapping

SOURCE = (
    "https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table"
)
GPU_PREFIX = "NVIDIA_"

# N1 machines take the four N1 GPUs; the counts allowed depend on the vCPUs.
_N1_SMALL = {  # up to 8 vCPUs
    "NVIDIA_TESLA_T4": (1, 2, 4),
    "NVIDIA_TESLA_P4": (1, 2, 4),
    "NVIDIA_TESLA_P100": (1, 2, 4),
    "NVIDIA_TESLA_V100": (1, 2, 4, 8),
}
_N1_16 = {**_N1_SMALL, "NVIDIA_TESLA_V100": (2, 4, 8)}
_N1_32 = {
    "NVIDIA_TESLA_T4": (2, 4),
    "NVIDIA_TESLA_P4": (2, 4),
    "NVIDIA_TESLA_P100": (2, 4),
    "NVIDIA_TESLA_V100": (4, 8),
}
_N1_64 = {"NVIDIA_TESLA_T4": (4,), "NVIDIA_TESLA_P4": (4,), "NVIDIA_TESLA_V100": (8,)}
_N1_BY_CPUS: dict[int, Mapping[str, tuple[int, ...]]] = {
    2: _N1_SMALL,
    4: _N1_SMALL,
    8: _N1_SMALL,
    16: _N1_16,
    32: _N1_32,
    64: _N1_64,
    96: _N1_64,
}


def _n1() -> dict[str, Mapping[str, tuple[int, ...]]]:
    table: dict[str, Mapping[str, tuple[int, ...]]] = {}
    for family, sizes in (
        ("n1-standard", (4, 8, 16, 32, 64, 96)),
        ("n1-highmem", (2, 4, 8, 16, 32, 64, 96)),
        ("n1-highcpu", (16, 32, 64, 96)),
    ):
        for cpus in sizes:
            table[f"{family}-{cpus}"] = _N1_BY_CPUS[cpus]
    return table


def _fixed(gpu: str, machines: Mapping[str, int]) -> dict[str, Mapping[str, tuple[int, ...]]]:
    """Accelerator-optimized machine types: each comes with exactly its GPU count."""
    return {machine: {gpu: (count,)} for machine, count in machines.items()}


# machine type → accelerator type → the accelerator counts Vertex accepts.
GPU_MACHINES: Mapping[str, Mapping[str, tuple[int, ...]]] = {
    **_n1(),
    **_fixed(
        "NVIDIA_L4",
        {
            "g2-standard-4": 1,
            "g2-standard-8": 1,
            "g2-standard-12": 1,
            "g2-standard-16": 1,
            "g2-standard-24": 2,
            "g2-standard-32": 1,
            "g2-standard-48": 4,
            "g2-standard-96": 8,
        },
    ),
    **_fixed(
        "NVIDIA_TESLA_A100",
        {"a2-highgpu-1g": 1, "a2-highgpu-2g": 2, "a2-highgpu-4g": 4, "a2-highgpu-8g": 8},
    ),
    **_fixed("NVIDIA_TESLA_A100", {"a2-megagpu-16g": 16}),
    **_fixed(
        "NVIDIA_A100_80GB",
        {"a2-ultragpu-1g": 1, "a2-ultragpu-2g": 2, "a2-ultragpu-4g": 4, "a2-ultragpu-8g": 8},
    ),
    **_fixed(
        "NVIDIA_H100_80GB",
        {"a3-highgpu-1g": 1, "a3-highgpu-2g": 2, "a3-highgpu-4g": 4, "a3-highgpu-8g": 8},
    ),
    **_fixed("NVIDIA_H100_MEGA_80GB", {"a3-megagpu-8g": 8}),
    **_fixed("NVIDIA_H200_141GB", {"a3-ultragpu-8g": 8}),
    **_fixed("NVIDIA_B200", {"a4-highgpu-8g": 8}),
}
_ACCELERATOR_OPTIMIZED = ("a2-", "a3-", "a4-", "g2-")
N1_SHAPES = ("standard", "highmem", "highcpu")
N1_CPUS = (1, 2, 4, 8, 16, 32, 64, 96)


class MachineError(ValueError):
    """A machine/accelerator combination Vertex refuses; one line naming it."""


def is_gpu(accelerator_type: str | None) -> bool:
    """Whether an accelerator type is an NVIDIA GPU (not a TPU, not none)."""
    return bool(accelerator_type) and str(accelerator_type).startswith(GPU_PREFIX)


def expected_gpus(accelerator_type: str | None, accelerator_count: int) -> int:
    """GPUs a replica of this machine spec is given on a cloud target (0 for TPUs or none)."""
    return int(accelerator_count) if is_gpu(accelerator_type) else 0


def one_accelerator(
    machine_type: str, accelerator_type: str | None, accelerator_count: int
) -> tuple[str, int]:
    """The machine spec closest to this one that Vertex accepts with a single GPU.

    For a job that uses one device (the features step) on the trial machine: the same
    type with one GPU when it takes one, else the same family's (then any) type that
    comes with one of this GPU, else the fewest this type takes. No GPU: unchanged.
    """
    count = int(accelerator_count)
    if count <= 1 or not is_gpu(accelerator_type):
        return machine_type, count
    allowed = GPU_MACHINES.get(machine_type, {}).get(str(accelerator_type), ())
    if 1 in allowed:
        return machine_type, 1
    family = machine_type.rsplit("-", 1)[0]
    ones = [m for m, gpus in GPU_MACHINES.items() if 1 in gpus.get(str(accelerator_type), ())]
    same = [m for m in ones if m.startswith(family)]
    if same or ones:
        return (same or ones)[0], 1
    return machine_type, min(allowed, default=count)


def check_machine(
    machine_type: str, accelerator_type: str | None, accelerator_count: int, *, what: str
) -> None:
    """Refuse a machine spec Vertex would refuse, naming `what` (e.g. `trial_machine_type`).

    Raises:
        MachineError: A negative count, a GPU count the machine type does not take, a GPU
            on a machine type that takes none, or an accelerator-optimized type without its GPU.
    """
    _check_known(machine_type, what)
    count = int(accelerator_count)
    prefix = f"{what}={machine_type} with {count} x {accelerator_type or 'no accelerator'}"
    if count < 0:
        raise MachineError(f"{prefix}: expected an accelerator count >= 0")
    allowed = GPU_MACHINES.get(machine_type, {})
    if count == 0:
        if machine_type.startswith(_ACCELERATOR_OPTIMIZED):
            choices = ", ".join(f"{n} x {gpu}" for gpu, ns in allowed.items() for n in ns)
            raise MachineError(  # `_check_known` refused the types without a row here
                f"{prefix}: {machine_type} comes with its GPUs (expected {choices})"
            )
        return
    if accelerator_type is None or not is_gpu(accelerator_type):
        return  # TPUs have their own machine types and topologies: not checked here
    if accelerator_type in allowed and count in allowed[accelerator_type]:
        return
    valid = ", ".join(f"{n} x {gpu}" for gpu, ns in allowed.items() for n in ns)
    expected = f"one of {valid}" if valid else "a machine type that takes GPUs"
    raise MachineError(f"{prefix}: Vertex refuses this combination (expected {expected}; {SOURCE})")


def _check_known(machine_type: str, what: str) -> None:
    """Refuse a name that is no machine type of a family listed here (N1, GPU-optimized).

    Other families (e2, c2, n2…) are left to Vertex: their names are not listed here.
    """
    if machine_type.startswith("n1-"):
        shape, _, cpus = machine_type.removeprefix("n1-").rpartition("-")
        if shape not in N1_SHAPES or not cpus.isdigit() or int(cpus) not in N1_CPUS:
            raise MachineError(
                f"{what}={machine_type}: not an N1 machine type (expected n1-"
                f"{'|'.join(N1_SHAPES)}-N, N one of {', '.join(map(str, N1_CPUS))})"
            )
    elif machine_type.startswith(_ACCELERATOR_OPTIMIZED) and machine_type not in GPU_MACHINES:
        family = [m for m in GPU_MACHINES if m.startswith(machine_type[:3])]
        raise MachineError(
            f"{what}={machine_type}: not a machine type of its family (expected one of "
            f"{', '.join(family)})"
        )
