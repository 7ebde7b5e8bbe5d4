"""The `TF_CONFIG` the Training Operator gives each TFJob replica, as its source behaves.

Only tests use it (moved here from `pipelines/targets/kubeflow/tfjob.py`): they check that
what the trainer reads from it (`trainer/cluster.py`) is the cluster the job meant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pipelines.targets.kubeflow import tfjob

CLUSTER_DOMAIN_ENV = "CUSTOM_CLUSTER_DOMAIN"  # tensorflow.go EnvCustomClusterDomain


def operator_tf_config(
    job_name: str,
    namespace: str,
    replicas: Mapping[str, int],
    task_type: str,
    index: int,
    *,
    port: int = tfjob.DEFAULT_PORT,
    cluster_domain: str | None = None,
) -> dict[str, Any] | None:
    """The `TF_CONFIG` the Training Operator gives replica (`task_type`, `index`).

    Reproduces the operator's release-1.9 `genClusterSpec` and `genTFConfigJSONStr`
    (addresses `<job>-<type>-<i>.<namespace>.svc[.<domain>]:<port>`, types lowercased;
    nothing for a one-replica job); the source lines: docs/kubeflow.md, "The Training
    Operator, as its source behaves".

    Args:
        job_name: The TFJob's name.
        namespace: Its namespace.
        replicas: Replica type as in the TFJob (`Chief`, `Worker`) → count.
        task_type: This replica's type (`Chief`, `Worker`).
        index: This replica's index within its type.
        port: The `tfjob-port` container port.
        cluster_domain: The operator's `CUSTOM_CLUSTER_DOMAIN` (default: its environment).

    Returns:
        The decoded `TF_CONFIG`, or None where the operator sets none.
    """
    if sum(replicas.values()) == 1:
        return None
    domain = os.environ.get(CLUSTER_DOMAIN_ENV, "") if cluster_domain is None else cluster_domain
    cluster = {}
    for rtype, count in replicas.items():
        kind = rtype.lower()
        hosts = []
        for i in range(count):
            host = f"{job_name}-{kind}-{i}".replace("/", "-") + f".{namespace}.svc"
            hosts.append(f"{host}.{domain}:{port}" if domain else f"{host}:{port}")
        cluster[kind] = hosts
    return {
        "cluster": cluster,
        "task": {"type": task_type.lower(), "index": int(index)},
        "environment": "cloud",
    }
