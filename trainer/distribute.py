"""Choose the tf.distribute strategy from the environment (TF_CONFIG / CLUSTER_SPEC / devices)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf

from trainer import cluster as cluster_lib


def configure_local_devices(count: int) -> list[str]:
    """Return the local devices to mirror over; split the CPU into `count` logical ones if asked.

    GPUs win when present. On a GPU-less host `count` > 1 splits the CPU into
    that many logical devices (how the local executors emulate a multi-GPU trial).
    Must run before TensorFlow initialises its devices.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return [f"/gpu:{i}" for i in range(len(gpus))]
    if count > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
        return [f"/cpu:{i}" for i in range(count)]
    return ["/cpu:0"]


def configure_threads(count: int) -> None:
    """Give TensorFlow's intra-op and inter-op pools `count` threads each (0: its default).

    Must run before TensorFlow initialises its runtime.
    """
    if count:
        tf.config.threading.set_intra_op_parallelism_threads(count)
        tf.config.threading.set_inter_op_parallelism_threads(count)


@contextlib.contextmanager
def graph_rewrites() -> Iterator[bool]:
    """Let Grappler rewrite the graphs traced inside where a GPU is visible; not on CPU only.

    On CPU only its passes delayed ResNet50's first step by ~3 s for the same steady
    speed (float32 and bf16; the CNN within 0.3 s): see benchmarks/results/resnet50.md,
    "Start-up on CPU". On GPUs (not measured: no GPU here) TensorFlow relies on its layout and
    fusion passes, so they stay. The setting it found is restored on the way out, for a
    process that goes on (tests, the fork server).

    Yields:
        Whether the rewrites are on.
    """
    found = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    rewrites = bool(tf.config.list_physical_devices("GPU"))
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not rewrites})
    try:
        yield rewrites
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": found})


def gpu_capabilities() -> list[tuple[int, int]]:
    """(major, minor) compute capability of each visible GPU (empty on a CPU-only host)."""
    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            found.append((int(capability[0]), int(capability[1])))
    return found


def make_strategy(distribution: str) -> tuple[tf.distribute.Strategy, cluster_lib.ClusterInfo]:
    """Build the strategy named by `distribution` (auto picks from the environment).

    auto: MultiWorkerMirroredStrategy when the cluster has several workers,
    MirroredStrategy when there are several local devices (GPUs or logical CPUs),
    else TensorFlow's default strategy. `HPT_CPU_THREADS`, when set, sizes the op
    thread pools first.

    Returns:
        The strategy and this process's cluster info.
    """
    info = cluster_lib.resolve()
    configure_threads(cluster_lib.requested_cpu_threads())
    if distribution == "auto":
        if info.num_training_tasks > 1:
            distribution = "multi_worker"
        else:
            count = cluster_lib.requested_logical_devices()
            gpus = tf.config.list_physical_devices("GPU")
            distribution = "mirrored" if (len(gpus) > 1 or count > 1) else "none"
    if distribution == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy(), info
    if distribution == "mirrored":
        devices = configure_local_devices(cluster_lib.requested_logical_devices())
        return tf.distribute.MirroredStrategy(devices=devices), info
    return tf.distribute.get_strategy(), info


def strategy_name(strategy: tf.distribute.Strategy) -> str:
    """The public name of a strategy (MWMS's class is CollectiveAllReduceStrategy)."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return "MultiWorkerMirroredStrategy"
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        return "MirroredStrategy"
    return "default"
