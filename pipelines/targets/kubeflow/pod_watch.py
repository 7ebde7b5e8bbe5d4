"""Fail fast on pods that cannot run: the tune and final steps read their pods at every poll.

Katib counts a created trial Job as running whatever its pods do, and a TFJob or TrainJob
sits at Created while its pods cannot start, so without this a run waits until
`kubeflow_timeout_s` (a day by default). `pod_problem` reads one pod's status the way
`kubectl describe` shows it: Unschedulable (the scheduler's message), an image that cannot
be pulled (`ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`), a container in
`CrashLoopBackOff` or `CreateContainerConfigError`, or a pod still Pending past
`kubeflow_pending_grace_s` (a pod with a node selector, a spot pod, is not Unschedulable
before that: its pool may be scaling up or out of spot capacity for a while); `watcher`
turns that into an `on_status` callback for `waiting.wait_for` that raises `PodProblem`,
one line naming the pod, the reason and the remedy. The caller deletes its Experiment or
job, as on cancel.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from pipelines.targets.kubeflow.waiting import KubeflowJobError

IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
CRASHING = "CrashLoopBackOff"
CONFIG = "CreateContainerConfigError"
UNSCHEDULABLE = "Unschedulable"


class PodProblem(KubeflowJobError):
    """A pod of the step cannot run; one line with the pod, the reason and the remedy."""


def _short(text: str | None, limit: int = 240) -> str:
    words = " ".join(str(text or "").split())
    return words if len(words) <= limit else words[: limit - 1] + "…"


def pod_problem(pod: Any, now: dt.datetime, grace_s: float) -> str | None:
    """Why `pod` (a `V1Pod`) cannot run, in one line with the remedy; None while it may.

    Args:
        pod: The pod as `CoreV1Api.list_namespaced_pod` returns it.
        now: The current time (UTC, aware).
        grace_s: How long a pod may stay Pending (image pulls, volume attachment).
    """
    meta, status = pod.metadata, pod.status
    where = f"pod {meta.namespace}/{meta.name}"
    if status is None:
        return None
    on_a_pool = bool(pod.spec and pod.spec.node_selector)  # spot: waits for the pool's nodes
    for cond in status.conditions or []:
        if on_a_pool:
            break
        if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == UNSCHEDULABLE:
            return (
                f"{where}: {UNSCHEDULABLE} ({_short(cond.message)}): no node has what it "
                "requests; lower kubeflow_cpu, kubeflow_memory or the accelerator counts, or add "
                "nodes that offer them"
            )
    containers = list(status.init_container_statuses or []) + list(status.container_statuses or [])
    for cs in containers:
        waiting = cs.state.waiting if cs.state else None
        if waiting is None:
            continue
        reason = waiting.reason
        if reason in IMAGE_PULL:
            return (
                f"{where}: {reason} for image {cs.image} ({_short(waiting.message)}): check that "
                "trainer_image is pushed and this cluster can pull it (registry access, an "
                "imagePullSecret on the service account)"
            )
        if reason == CRASHING:
            return (
                f"{where}: container {cs.name} {CRASHING} after {cs.restart_count} restarts: read "
                f"why with `kubectl logs -n {meta.namespace} {meta.name} -c {cs.name} --previous`"
            )
        if reason == CONFIG:
            return (
                f"{where}: {CONFIG} ({_short(waiting.message)}): a Secret or ConfigMap it "
                "names is missing"
            )
    created = meta.creation_timestamp
    if status.phase == "Pending" and created is not None:
        age = (now - created).total_seconds()
        if age > grace_s:
            return (
                f"{where}: Pending for {age:.0f}s, longer than kubeflow_pending_grace_s="
                f"{grace_s:g}: see `kubectl describe pod -n {meta.namespace} {meta.name}`; raise "
                "kubeflow_pending_grace_s if pulls or volumes are slow here"
            )
    return None


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def watcher(
    core: Any,
    namespace: str,
    label_selector: str,
    *,
    grace_s: float,
    then: Callable[[dict[str, Any]], None] | None = None,
    now: Callable[[], dt.datetime] = _utcnow,
    echo: Callable[[str], None] = print,
) -> Callable[[dict[str, Any]], None]:
    """An `on_status` callback: `then(obj)` (progress), then the step's pods are checked.

    Args:
        core: A `CoreV1Api`.
        namespace: The pods' namespace.
        label_selector: Selects the step's pods (e.g. `jobset.sigs.k8s.io/jobset-name=<job>`).
        grace_s: `kubeflow_pending_grace_s`.
        then: The progress callback it wraps.
        now: The current time (tests).
        echo: Where the line saying pods cannot be read (403) goes, once.

    Raises (from the callback):
        PodProblem: The first pod that cannot run (`pod_problem`).
    """
    from kubernetes.client import ApiException

    said = False  # the 403 line is said once

    def on_status(obj: dict[str, Any]) -> None:
        nonlocal said
        if then is not None:
            then(obj)
        try:
            pods = core.list_namespaced_pod(namespace, label_selector=label_selector)
        except ApiException as err:
            if err.status == 403 and not said:  # a help, not a new permission
                said = True
                echo(f"pods in {namespace}: not readable by this service account, not watched")
            return
        moment = now()
        for pod in pods.items or []:
            problem = pod_problem(pod, moment, grace_s)
            if problem:
                raise PodProblem(problem)

    return on_status
