"""The Kubernetes API as the Kubeflow components use it: custom objects, created once.

`custom_objects_api` loads the in-cluster configuration (a component runs in a
pod) and falls back to the kubeconfig (a developer's machine). `create_or_get`
creates an object or, when one with that name exists already (a retried task),
returns it, so a retry waits on the same job instead of starting a second one.
`deleted_on_sigterm` deletes the object when the run is cancelled (KFP stops the
step's pod with SIGTERM, which reaches Python: `components.base.exec_python`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

CANCELLED_EXIT = 128 + signal.SIGTERM  # what a process killed by SIGTERM reports


def stable_name(prefix: str, folder: str, role: str, head_length: int) -> str:
    """`<head>-<role>-<10 hex digits of folder>`: a DNS-1035 name, the same for the same folder.

    A retried task, or a rerun on the same folder, names (and so finds) the same object.

    Args:
        prefix: Readable start: lowercased, other characters → `-`, from its first letter on,
            cut at `head_length` (`hpt` when nothing is left).
        folder: The object's output folder, unique per run and task.
        role: What the object is (`hpt`, `final`).
        head_length: The most characters kept of `prefix`.
    """
    digest = hashlib.sha256(folder.encode()).hexdigest()[:10]
    head = re.sub(r"[^a-z0-9-]+", "-", prefix.lower())
    head = re.sub(r"^[^a-z]+", "", head)[:head_length].rstrip("-") or "hpt"
    return f"{head}-{role}-{digest}"


DNS_LABEL_MAX = 63  # a pod's name is a DNS-1035 label where JobSet checks it
# JobSet's webhook (kubernetes-sigs/jobset v0.10.1 `pkg/webhooks/jobset_webhook.go` l.231-241,
# v0.12.0 l.244-255) checks the longest pod name, `placement.GenPodName` plus this stand-in
# for the 5 random characters the pod gets.
JOBSET_POD_SUFFIX = "-abcde"


def jobset_longest_pod_name(jobset: str, replicated_job: str, replicas: int, pods: int) -> str:
    """The name JobSet's webhook checks: `<jobset>-<job>-<last job>-<last pod>-abcde`.

    Args:
        jobset: The JobSet's name (a TrainJob's: the TrainJob's name).
        replicated_job: The replicated job's name (Trainer v2's runtime: `node`).
        replicas: Its jobs (`replicas`); the last index is `replicas - 1`.
        pods: Pods per job (an indexed job's `completions`, a TrainJob's node count).
    """
    return f"{jobset}-{replicated_job}-{replicas - 1}-{pods - 1}{JOBSET_POD_SUFFIX}"


def jobset_name_room(replicated_job: str, pods: int) -> int:
    """The longest JobSet name whose longest pod name (one job of `pods`) is <= 63 characters."""
    return DNS_LABEL_MAX - len(jobset_longest_pod_name("", replicated_job, 1, pods))


# Kubeflow profile namespaces (and `kubeflow`) inject Istio's sidecar; a pod that must *finish*
# (a trial's Job, a TFJob replica) opts out, or the sidecar keeps it Running for ever.
NO_SIDECAR = {"sidecar.istio.io/inject": "false"}
# Every pod the target creates runs as this one non-root uid, the components image's user
# (images/components/Dockerfile) and the trainer image's (images/trainer/Dockerfile): files on
# a shared claim (NFS with root_squash) stay writable by every step, and PSS `restricted`
# admits the pods where an admin sets it (1.11's profiles enforce `baseline`; docs/kubeflow.md).
RUN_AS_UID = 1000


@dataclasses.dataclass(frozen=True)
class ReplicaPods:
    """What every pod of a final job (TFJob replica or TrainJob node) gets.

    Attributes:
        cpu: CPU request and limit (a Kubernetes quantity).
        memory: Memory request and limit.
        service_account: The pods' service account (None: the namespace's default).
        data_pvc: A PersistentVolumeClaim mounted in every pod at `data_mount_path`.
        data_mount_path: Where `data_pvc` is mounted (the setting of that name).
        spot_label: The spot pool's node label `key=value` (`final_scheduling: spot`), or ""
            (`spot.placement`).
    """

    cpu: str
    memory: str
    service_account: str | None = None
    data_pvc: str | None = None
    data_mount_path: str = "/mnt/hpt"
    spot_label: str = ""


def pod_security_context() -> Any:
    """A `V1PodSecurityContext`: the non-root uid/gid, files on claims group-owned by it."""
    from kubernetes import client

    return client.V1PodSecurityContext(
        run_as_non_root=True,
        run_as_user=RUN_AS_UID,
        run_as_group=RUN_AS_UID,
        fs_group=RUN_AS_UID,
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
    )


def container_security_context() -> Any:
    """A container `V1SecurityContext` PSS `restricted` admits."""
    from kubernetes import client

    return client.V1SecurityContext(
        allow_privilege_escalation=False, capabilities=client.V1Capabilities(drop=["ALL"])
    )


def pod_security() -> dict[str, Any]:
    """`pod_security_context` as the API's JSON."""
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(pod_security_context())  # type: ignore[no-any-return]


def container_security() -> dict[str, Any]:
    """`container_security_context` as the API's JSON."""
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(container_security_context())  # type: ignore[no-any-return]


def gpu_env(limits: Mapping[str, str]) -> dict[str, str]:
    """`NVIDIA_VISIBLE_DEVICES=void` for a container that asks for no GPU, else nothing.

    The trainer image sets `all` (NVIDIA's CUDA images do; Vertex needs it): on a GPU node,
    a pod that asked for none would see every GPU of the node. NVIDIA's device plugin sets
    the variable for a pod that asks for GPUs, so those are left alone.
    """
    return {} if limits.get("nvidia.com/gpu") else {"NVIDIA_VISIBLE_DEVICES": "void"}


def _load_config() -> Any:
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client


def custom_objects_api() -> Any:
    """A `kubernetes.client.CustomObjectsApi`: in-cluster config, else the kubeconfig.

    Raises:
        kubernetes.config.ConfigException: Neither is available.
    """
    return _load_config().CustomObjectsApi()


def core_v1_api() -> Any:
    """A `kubernetes.client.CoreV1Api` (namespaces, claims, nodes), configured as above."""
    return _load_config().CoreV1Api()


def create_or_get(
    api: Any, *, group: str, version: str, plural: str, body: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Create `body` in its namespace, or get the object that already has its name.

    Args:
        api: A `CustomObjectsApi` (or a stand-in with the same two methods).
        group: API group, e.g. `kubeflow.org`.
        version: API version, e.g. `v1`.
        plural: Resource, e.g. `tfjobs`.
        body: The object; `metadata.name` and `metadata.namespace` are used.

    Returns:
        (the object as the API returned it, whether it was created now).

    Raises:
        kubernetes.client.ApiException: Any refusal but "already exists" (409).
    """
    from kubernetes.client import ApiException

    meta = body["metadata"]
    try:
        created = api.create_namespaced_custom_object(
            group, version, meta["namespace"], plural, dict(body)
        )
        return created, True
    except ApiException as err:
        if err.status != 409:
            raise
    found = api.get_namespaced_custom_object(
        group, version, meta["namespace"], plural, meta["name"]
    )
    return found, False


def api_error_line(err: Any) -> str:
    """One line from a `kubernetes.client.ApiException`: status, reason and the API's message."""
    import json

    message = ""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (TypeError, ValueError):
        message = str(err.body or "")
    text = " ".join(f"{err.status} {err.reason}: {message}".split())
    return text.rstrip(": ")


def delete_custom_object(
    api: Any,
    *,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    name: str,
    echo: Callable[[str], None] = print,
) -> bool:
    """Delete the object, its dependents in the background; whether this call deleted it.

    False when it was gone already (404, silent) or the API refused (said in one line).

    How a step stops what it started (a cancelled run, a pod that cannot run): Katib's
    Trials and a job's pods are owned by the object and garbage-collected with it.
    """
    from kubernetes.client import ApiException

    try:
        api.delete_namespaced_custom_object(
            group, version, namespace, plural, name, propagation_policy="Background"
        )
    except ApiException as err:
        if err.status != 404:
            echo(f"{plural} {namespace}/{name} NOT deleted ({api_error_line(err)})")
        return False
    return True


@contextlib.contextmanager
def deleted_on_sigterm(
    api: Any,
    *,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    name: str,
    echo: Callable[[str], None] = print,
) -> Iterator[None]:
    """While inside, SIGTERM deletes the object (dependents in the background) and exits 143.

    The Kubeflow counterpart of GCPC's cancel-on-SIGTERM: a cancelled run stops
    the Experiment or TFJob its step waits on. Deleting is how both are stopped:
    Katib's Trials, and the Training Operator's pods, are owned by the object and
    garbage-collected with it. Outside the main thread (no signal handlers there)
    nothing is installed.

    Args:
        api: A `CustomObjectsApi` (or a stand-in with `delete_namespaced_custom_object`).
        group: API group.
        version: API version.
        plural: Resource.
        namespace: The object's namespace.
        name: The object's name (deleted even if this task did not create it: the run waits on it).
        echo: Where the cancellation line goes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(_signum: int, _frame: Any) -> None:
        where = dict(group=group, version=version, plural=plural, namespace=namespace, name=name)
        if delete_custom_object(api, **where, echo=lambda line: echo(f"Cancelled: {line}")):
            echo(f"Cancelled: {plural} {namespace}/{name} deleted")
        raise SystemExit(CANCELLED_EXIT)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
