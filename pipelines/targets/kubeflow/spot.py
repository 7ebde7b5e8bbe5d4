"""Spot capacity on Kubeflow: pods placed on a spot node pool, and a preempted trial retried.

`trial_scheduling: spot` (trial pods) and `final_scheduling: spot` (the final job's
replicas) put their pods on the nodes labelled `kubeflow_spot_node_label` (`key=value`,
checked in `settings_cloud`; GKE labels a spot pool's nodes `cloud.google.com/gke-spot=true`)
with a node selector, and
tolerate the taint of the same key and value (`NoSchedule`) that keeps other pods off such
a pool. A trial Job also ignores a pod failure that carries the `DisruptionTarget` condition
(Kubernetes' `podFailurePolicy`, stable in 1.31: preemption, eviction, node shutdown), so
the Job makes a new pod instead of failing the trial (`backoffLimit: 0` counts the rest);
the new pod resumes from the trial's epoch checkpoint (`AIP_CHECKPOINT_DIR`, per Trial).
"""

from __future__ import annotations

from typing import Any

SPOT = "spot"
PREEMPTED_POD_IGNORED = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
}


def spot_label(settings: Any, name: str) -> str:
    """`kubeflow_spot_node_label` where the scheduling setting `name` is spot, else ""."""
    return settings.kubeflow.kubeflow_spot_node_label if settings.value(name) == SPOT else ""


def placement(label: str) -> dict[str, Any]:
    """The pod spec's `nodeSelector` and `tolerations` (camelCase) for `label`; {} for ""."""
    if not label:
        return {}
    key, value = label.split("=", 1)
    toleration = {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}
    return {"nodeSelector": {key: value}, "tolerations": [toleration]}
