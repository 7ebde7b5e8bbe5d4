"""Read the cluster a process belongs to from `TF_CONFIG` or Vertex's `CLUSTER_SPEC` (no TF import).

Vertex sets both variables for TensorFlow jobs: `CLUSTER_SPEC` names pools
`workerpool0..3`, `TF_CONFIG` uses `chief`/`worker`/`ps`/`evaluator`. When only
`CLUSTER_SPEC` is present, it is translated, so TensorFlow's resolver works.

Kubeflow Trainer v2 (a `TrainJob`) sets neither: its pods are one indexed Job of a
JobSet, each with `JOB_COMPLETION_INDEX` and a stable host name. The TrainJob the
pipeline builds adds `HPT_NUM_NODES` and `HPT_NODE_ADDRESS` (a `{index}` pattern, e.g.
`job-node-0-{index}.job:2222`), from which `TF_CONFIG` is formed: all nodes are
`worker`s, worker 0 is the chief (TensorFlow's rule) and the only one to export.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

# Vertex worker pool index → TF_CONFIG task type.
POOL_TASK_TYPES = ("chief", "worker", "ps", "evaluator")

# A TrainJob node's place: the node count and an address pattern with `{index}` (module doc).
NUM_NODES_ENV = "HPT_NUM_NODES"
NODE_ADDRESS_ENV = "HPT_NODE_ADDRESS"
INDEX_ENV = "JOB_COMPLETION_INDEX"  # set by Kubernetes in every pod of an Indexed Job

# The variable the local executors set to emulate `accelerator_count` devices on a CPU host.
LOGICAL_DEVICES_ENV = "HPT_LOGICAL_DEVICES"
# The variable the local executors set when replicas share this host's cores: the threads
# each of TensorFlow's op pools (intra-op and inter-op) gets in a replica.
CPU_THREADS_ENV = "HPT_CPU_THREADS"


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """This process's place in a (possibly one-task) cluster."""

    cluster: dict[str, list[str]]
    task_type: str | None
    task_id: int

    @property
    def num_training_tasks(self) -> int:
        """Tasks that train: chief + workers (Settings.workers counts the workers only)."""
        return len(self.cluster.get("chief", [])) + len(self.cluster.get("worker", []))

    @property
    def is_chief(self) -> bool:
        """TensorFlow's rule: `chief` is chief; with no `chief` task, worker 0 is."""
        return is_chief(self.cluster, self.task_type, self.task_id)


def is_chief(cluster: dict[str, Any], task_type: str | None, task_id: int) -> bool:
    """Whether (task_type, task_id) is the chief of `cluster` (no cluster: yes)."""
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def tf_config_from_cluster_spec(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    """Translate Vertex's `CLUSTER_SPEC` into the equivalent `TF_CONFIG`."""
    cluster = {
        POOL_TASK_TYPES[int(pool.removeprefix("workerpool"))]: list(addresses)
        for pool, addresses in cluster_spec.get("cluster", {}).items()
        if addresses
    }
    task = cluster_spec.get("task", {})
    pool = task.get("type", "workerpool0")
    return {
        "cluster": cluster,
        "task": {
            "type": POOL_TASK_TYPES[int(pool.removeprefix("workerpool"))],
            "index": int(task.get("index", 0)),
        },
    }


def tf_config_from_indexed_job(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """`TF_CONFIG` for a TrainJob node from `HPT_NUM_NODES`, `HPT_NODE_ADDRESS`, the job index.

    Returns:
        {} for a one-node job (it trains alone, as the chief).

    Raises:
        ValueError: A variable missing or malformed, named with what is expected.
    """
    raw_count = environ.get(NUM_NODES_ENV, "")
    try:
        count = int(raw_count)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{NUM_NODES_ENV}={raw_count!r}: expected an integer >= 1")
    pattern = environ.get(NODE_ADDRESS_ENV, "")
    if "{index}" not in pattern:
        raise ValueError(f"{NODE_ADDRESS_ENV}={pattern!r}: expected host:port with {{index}}")
    raw_index = environ.get(INDEX_ENV, "")
    if not raw_index.isdigit() or int(raw_index) >= count:
        raise ValueError(
            f"{INDEX_ENV}={raw_index!r}: expected an integer from 0 to {count - 1} "
            "(an Indexed Job's pod sets it)"
        )
    if count == 1:
        return {}
    workers = [pattern.replace("{index}", str(i)) for i in range(count)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": int(raw_index)}}


def resolve(environ: dict[str, str] | None = None) -> ClusterInfo:
    """Find this process's cluster, filling `TF_CONFIG` from `CLUSTER_SPEC` if needed.

    Without either, a TrainJob node's variables (`HPT_NODE_ADDRESS`, module doc) give it.

    Args:
        environ: Environment to read and (for TF_CONFIG) update; defaults to os.environ.
    """
    env = os.environ if environ is None else environ
    raw = env.get("TF_CONFIG", "")
    if not raw and env.get("CLUSTER_SPEC"):
        config = tf_config_from_cluster_spec(json.loads(env["CLUSTER_SPEC"]))
        env["TF_CONFIG"] = json.dumps(config)
    elif not raw and env.get(NODE_ADDRESS_ENV):
        config = tf_config_from_indexed_job(env)
        if config:
            env["TF_CONFIG"] = json.dumps(config)
    else:
        config = json.loads(raw) if raw else {}
    task = config.get("task", {})
    return ClusterInfo(
        cluster=config.get("cluster", {}),
        task_type=task.get("type"),
        task_id=int(task.get("index", 0)),
    )


def _count(name: str, environ: dict[str, str] | None) -> int:
    """A non-negative integer variable (0 when unset); ValueError naming it otherwise."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "") or "0"
    try:
        value = int(raw)
    except ValueError as err:
        raise ValueError(f"{name}={raw}: expected an integer >= 0") from err
    if value < 0:
        raise ValueError(f"{name}={raw}: expected an integer >= 0")
    return value


def requested_logical_devices(environ: dict[str, str] | None = None) -> int:
    """Logical CPU devices asked for through `HPT_LOGICAL_DEVICES` (0 when unset)."""
    return _count(LOGICAL_DEVICES_ENV, environ)


def requested_cpu_threads(environ: dict[str, str] | None = None) -> int:
    """Threads per TensorFlow op pool asked for through `HPT_CPU_THREADS` (0: TF's default)."""
    return _count(CPU_THREADS_ENV, environ)
