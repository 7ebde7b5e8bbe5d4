"""The devices a replica trains on, said first, and refused when fewer GPUs than it was given.

A cloud target sets `--expected_gpus N` from the worker pool's `accelerator_count` when
the accelerator is a GPU. A container that cannot see the driver the platform mounts
(Vertex: `/usr/local/nvidia`, see `images/trainer/Dockerfile`) finds no GPU and would
quietly train on the CPU while the GPUs are billed: the trainer fails in one line
instead, before any training time is spent. TensorFlow is imported inside the
functions only, so the pure rule is testable without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainer import cluster


class DeviceError(RuntimeError):
    """Fewer GPUs visible than the replica was given; the message is one line."""


def visible_gpus() -> list[str]:
    """The names of the GPUs TensorFlow sees (`Tesla T4`, …); empty on a CPU-only host.

    Lists physical devices only: TensorFlow's runtime stays unstarted, so the
    strategy can still split the CPU into logical devices afterwards.
    """
    import tensorflow as tf

    names = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        names.append(str(details.get("device_name") or gpu.name))
    return names


def device_line(gpus: Sequence[str], expected: int, logical_cpus: int = 0) -> str:
    """The trainer's first line: what it trains on, and what it was told to expect."""
    wanted = f" (expected {expected})" if expected else ""
    if gpus:
        return f"devices: {len(gpus)} GPU{'s' if len(gpus) > 1 else ''}{wanted}: {', '.join(gpus)}"
    split = f", split into {logical_cpus} logical devices" if logical_cpus > 1 else ""
    return f"devices: CPU only, no GPU visible{wanted}{split}"


def check_expected(gpus: Sequence[str], expected: int) -> None:
    """Refuse to train with fewer visible GPUs than `expected` (0: no expectation).

    Raises:
        DeviceError: One line naming the flag, what is visible and where to look.
    """
    if len(gpus) >= expected:
        return
    raise DeviceError(
        f"--expected_gpus={expected}: this replica sees {len(gpus)} GPU(s); the NVIDIA driver "
        "is not visible (LD_LIBRARY_PATH must include /usr/local/nvidia/lib64 on Vertex), "
        "so it would train on the CPU while the GPUs are billed"
    )


def announce(expected: int) -> str:
    """Check the visible GPUs against `expected` and return the device line.

    Raises:
        DeviceError: Fewer GPUs than expected.
    """
    gpus = visible_gpus()
    check_expected(gpus, expected)
    return device_line(gpus, expected, cluster.requested_logical_devices())
