"""The environment Vertex AI gives a training replica, rebuilt for local execution.

Both local executors (study and custom job) start processes with exactly this
environment, so the trainer cannot tell them from Vertex.
"""

from __future__ import annotations

import json
import posixpath
import sys
from collections.abc import Sequence

# Vertex worker-pool index → TF_CONFIG task type.
POOL_TASK_TYPES = ("chief", "worker", "ps", "evaluator")
# Set on local replicas to split the CPU into `accelerator_count` logical devices
# (must equal trainer.cluster.LOGICAL_DEVICES_ENV; this module must not import TensorFlow).
LOGICAL_DEVICES_ENV = "HPT_LOGICAL_DEVICES"


def output_dirs(base_output_directory: str, trial_id: str | None = None) -> dict[str, str]:
    """`AIP_MODEL_DIR`, `AIP_CHECKPOINT_DIR`, `AIP_TENSORBOARD_LOG_DIR` for a job or a trial.

    Vertex uses `<base>/model/` … for a job and `<base>/<trial_id>/model/` … for an HPT trial.
    """
    root = posixpath.join(base_output_directory, trial_id) if trial_id else base_output_directory
    return {
        "AIP_MODEL_DIR": posixpath.join(root, "model") + "/",
        "AIP_CHECKPOINT_DIR": posixpath.join(root, "checkpoints") + "/",
        "AIP_TENSORBOARD_LOG_DIR": posixpath.join(root, "logs") + "/",
    }


def cluster_env(
    cluster: dict[str, Sequence[str]],
    pool_index: int,
    replica_index: int,
    trial_id: str | None = None,
) -> dict[str, str]:
    """`CLUSTER_SPEC` and `TF_CONFIG` for one replica.

    Args:
        cluster: Pool name (`workerpool0`…) → replica addresses (`host:port`).
        pool_index: The replica's pool (0 chief, 1 workers, 2 ps, 3 evaluator).
        replica_index: Index within the pool.
        trial_id: HPT trial id, when the replica belongs to a trial.
    """
    task: dict[str, object] = {"type": f"workerpool{pool_index}", "index": replica_index}
    if trial_id:
        task["trial"] = trial_id
    tf_cluster = {
        POOL_TASK_TYPES[int(name.removeprefix("workerpool"))]: list(addresses)
        for name, addresses in cluster.items()
        if addresses
    }
    tf_config = {
        "cluster": tf_cluster,
        "task": {"type": POOL_TASK_TYPES[pool_index], "index": replica_index},
        "environment": "cloud",
    }
    return {
        "CLUSTER_SPEC": json.dumps(
            {"cluster": {k: list(v) for k, v in cluster.items()}, "task": task}
        ),
        "TF_CONFIG": json.dumps(tf_config),
    }


def local_command(command: Sequence[str]) -> list[str]:
    """Make a container command runnable here: `python`/`python3` becomes this interpreter."""
    argv = list(command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv
