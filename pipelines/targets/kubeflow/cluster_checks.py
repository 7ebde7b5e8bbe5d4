"""What the cluster must offer a Kubeflow step, checked through its API before anything starts.

A standard Kubeflow install (manifests v1.9-v1.11) can fail a run in ways only the cluster
can tell; each is read here, before the Experiment or the final job is created, and refused
in one line naming the remedy: the final job's API not served (`job_api`), a Katib that
drops `logUniform` (< 0.18, found by a server-side dry run or in the stored object), a data
claim that is not ReadWriteMany on a cluster of several nodes, a namespace that is not a
Kubeflow profile with Katib's collector label (Istio injection is reported), GPUs no node
has, and a data or output path only one pod sees
(`check_shared_path`). What the account may not read (403) is said in one line and skipped:
the checks are a help, not a new permission. Why each matters: docs/kubeflow.md, "Kubeflow"
(Checks) and "The cluster and KFP's API".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.payloads import payload_items
from pipelines.targets.kubeflow import job_api
from pipelines.targets.kubeflow.kube import api_error_line
from pipelines.targets.kubeflow.waiting import KubeflowJobError

PROFILE_LABEL = ("app.kubernetes.io/part-of", "kubeflow-profile")
COLLECTOR_LABEL = ("katib.kubeflow.org/metrics-collector-injection", "enabled")
KATIB_NAMESPACE = "kubeflow"  # Katib's DB NetworkPolicy also admits its own namespace
ISTIO_LABELS = ("istio-injection", "istio.io/rev")
PSS_ENFORCE = "pod-security.kubernetes.io/enforce"  # 1.11's profiles: baseline
GPU_RESOURCE = "nvidia.com/gpu"
RWX = "ReadWriteMany"
RWO = "ReadWriteOnce"  # enough where every pod runs on one node (kind, minikube, k3s)
LOG_SCALE = "logUniform"
Echo = Callable[[str], None]


class ClusterCheckError(KubeflowJobError):
    """The cluster cannot run the step as configured; one line naming the remedy."""


def _read(call: Callable[[], Any], what: str, echo: Echo) -> Any:
    """`call()`, or None with one line when the account may not read `what` (403)."""
    from kubernetes.client import ApiException

    try:
        return call()
    except ApiException as err:
        if err.status == 403:
            echo(f"{what}: not readable by this service account, not checked ({err.reason})")
            return None
        raise


def check_job_api(custom: Any, setting: str = "tfjob", echo: Echo = print) -> str:
    """The final job's API (`kubeflow_job_api`) is served; returns `tfjob` or `trainjob`.

    Raises:
        ClusterCheckError: It is not (`job_api.resolve`'s line, with the remedy).
    """
    try:
        return job_api.resolve(custom, setting, echo)
    except job_api.JobApiError as err:
        raise ClusterCheckError(str(err)) from None


def check_namespace(core: Any, namespace: str, echo: Echo = print) -> None:
    """The namespace is a Kubeflow profile (or Katib's) with Katib's collector injection on.

    Raises:
        ClusterCheckError: Another namespace, naming the label or profile it needs.
    """
    found = _read(lambda: core.read_namespace(namespace), f"namespace {namespace}", echo)
    if found is None:
        return
    labels = found.metadata.labels or {}
    key, value = PROFILE_LABEL
    if namespace != KATIB_NAMESPACE and labels.get(key) != value:
        raise ClusterCheckError(
            f"namespace {namespace}: not a Kubeflow profile (no label {key}={value}); since "
            "Kubeflow 1.9 Katib's NetworkPolicy admits trial metrics only from profile "
            "namespaces, so every trial would fail: use a profile namespace (kubeflow_namespace), "
            f"create a Profile for {namespace}, or label it {key}={value} (Katib without Profiles)"
        )
    key, value = COLLECTOR_LABEL
    if labels.get(key) != value:
        raise ClusterCheckError(
            f"namespace {namespace}: no label {key}={value}, so Katib injects no metrics "
            f"collector and every trial fails: kubectl label namespace {namespace} {key}={value}"
        )
    istio = [f"{k}={labels[k]}" for k in ISTIO_LABELS if labels.get(k) not in (None, "disabled")]
    note = f"Istio injection on ({', '.join(istio)}); trial and TFJob pods opt out" if istio else ""
    echo(
        f"namespace {namespace}: Kubeflow profile, Katib metrics collector on"
        + (f"; {note}" if note else "")
    )
    if labels.get(PSS_ENFORCE) == "restricted":  # katib-config is Katib's, often unreadable here
        echo(
            f"namespace {namespace}: PSS restricted ({PSS_ENFORCE}=restricted): Katib's injected "
            "metrics collector passes only where ConfigMap kubeflow/katib-config sets "
            "init.controller.injectSecurityContext: true (else every trial pod is refused)"
        )


def _single_node(core: Any, echo: Echo) -> bool:
    """Whether the cluster has one node (kind, minikube, k3s); False where nodes are unreadable."""
    nodes = _read(core.list_node, "nodes", echo)
    return nodes is not None and len(nodes.items or []) == 1


def check_claim(core: Any, namespace: str, claim: str, echo: Echo = print) -> None:
    """`data_pvc` exists in the namespace and is ReadWriteMany (or ReadWriteOnce on one node).

    Every pod of a one-node cluster mounts the claim from that node, so ReadWriteOnce works
    there; elsewhere trials, replicas and steps mount it from several nodes at once.

    Raises:
        ClusterCheckError: Missing, or without ReadWriteMany on a cluster of several nodes.
    """
    from kubernetes.client import ApiException

    what = f"data_pvc={claim}"
    try:
        found = _read(
            lambda: core.read_namespaced_persistent_volume_claim(claim, namespace), what, echo
        )
    except ApiException as err:
        if err.status != 404:
            raise ClusterCheckError(f"{what}: {api_error_line(err)}") from None
        raise ClusterCheckError(
            f"{what}: no PersistentVolumeClaim {claim} in namespace {namespace}; create it "
            f"({RWX}, writable by uid 1000) or set data_pvc to one that exists"
        ) from None
    if found is None:
        return
    modes = list((found.status and found.status.access_modes) or found.spec.access_modes or [])
    if RWX not in modes and RWO in modes and _single_node(core, echo):
        echo(f"{what}: {RWO} on a single-node cluster: accepted (every pod runs on that node)")
        return
    if RWX not in modes:
        raise ClusterCheckError(
            f"{what}: access modes {', '.join(modes) or 'none'}; parallel trials, the final job's "
            f"replicas and the pipeline's steps mount it from several nodes at once: use a {RWX} "
            f"claim (an NFS, CephFS, EFS or Filestore StorageClass); {RWO} is accepted on a "
            "single-node cluster whose nodes this account may list"
        )
    echo(f"{what}: {RWX}")


def gpu_count(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> int:
    """The most `nvidia.com/gpu` one replica of these pools asks for (as the pods are built)."""
    most = 0
    for pool in payload_items(worker_pool_specs):
        machine = pool.get("machine_spec") or {}
        if machine.get("accelerator_type"):
            most = max(most, int(float(machine.get("accelerator_count") or 0)))
    return most


def check_gpus(core: Any, count: int, setting: str, echo: Echo = print) -> None:
    """Some node offers `count` GPUs, or the pods would stay Pending until the timeout.

    Args:
        core: A `CoreV1Api`.
        count: GPUs one pod asks for (0: nothing to check).
        setting: The setting that asks for them, for the message.
        echo: Where the "not checked" line goes.

    Raises:
        ClusterCheckError: No node has `count` allocatable GPUs.
    """
    if count <= 0:
        return
    nodes = _read(core.list_node, "nodes", echo)
    if nodes is None:
        return
    offered = [int((n.status.allocatable or {}).get(GPU_RESOURCE, "0")) for n in nodes.items or []]
    most = max(offered, default=0)
    if most < count:
        raise ClusterCheckError(
            f"{setting}={count}: no node offers {count} {GPU_RESOURCE} (at most {most} on "
            f"{len(offered)} nodes), the pods would stay Pending: set {setting}: 0 to train on "
            "CPU, or add GPU nodes with NVIDIA's device plugin"
        )


def check_shared_path(path: str, what: str, pvc_name: str, mount_path: str) -> None:
    """`path` is one every pod reads: gs://, or under the data claim's mount.

    KFP's launcher maps minio:// and s3:// artifacts to `/minio/…` and `/s3/…` inside its
    own pods only (`LocalPathForURI`): a trial given such a path exits on `--data`.

    Raises:
        ClusterCheckError: Any other path.
    """
    root = mount_path.rstrip("/") + "/"
    if path.startswith("gs://") or (pvc_name and (path + "/").startswith(root)):
        return
    raise ClusterCheckError(
        f"{what}={path}: only this pod sees it (KFP maps minio:// and s3:// to local paths); "
        "set data_pvc to a ReadWriteMany PersistentVolumeClaim, or pipeline_root to a gs:// folder"
    )


def flag_value(worker_pool_specs: Sequence[Mapping[str, Any] | str], name: str) -> str | None:
    """The value of trainer flag `--<name>=` in the first pool's args (None: not given)."""
    prefix = f"--{name}="
    for pool in payload_items(worker_pool_specs)[:1]:
        for arg in (pool.get("container_spec") or {}).get("args") or []:
            if str(arg).startswith(prefix):
                return str(arg)[len(prefix) :]
    return None


def check_pods_can_run(
    core: Any,
    custom: Any,
    *,
    namespace: str,
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    pvc_name: str,
    data_mount_path: str,
    gpu_setting: str,
    job_api_setting: str = "tfjob",
    echo: Echo = print,
) -> str:
    """What both steps check before they start pods (the final job's API in the tune step too).

    The namespace, the final job's API, the claim, a data path every pod reads, the GPUs.
    Nine parameters: the two API clients, then one keyword per check, which both callers name.

    Returns:
        The final job's API: `tfjob` or `trainjob` (`job_api.resolve`).

    Raises:
        ClusterCheckError: The first condition that fails, in one line with its remedy.
    """
    check_namespace(core, namespace, echo)
    resolved = check_job_api(custom, job_api_setting, echo)
    if pvc_name:
        check_claim(core, namespace, pvc_name, echo)
    data = flag_value(worker_pool_specs, "data")
    if data is not None:
        check_shared_path(data, "--data", pvc_name, data_mount_path)
    check_gpus(core, gpu_count(worker_pool_specs), gpu_setting, echo)
    return resolved


def dropped_log_scales(sent: Mapping[str, Any], returned: Mapping[str, Any]) -> list[str]:
    """Parameters sent with `distribution: logUniform` that the API gave back without it."""
    back = {
        p.get("name"): (p.get("feasibleSpace") or {}).get("distribution")
        for p in (returned.get("spec") or {}).get("parameters") or []
    }
    return [
        p["name"]
        for p in (sent.get("spec") or {}).get("parameters") or []
        if (p.get("feasibleSpace") or {}).get("distribution") == LOG_SCALE
        and back.get(p["name"]) != LOG_SCALE
    ]


def check_log_scales(sent: Mapping[str, Any], returned: Mapping[str, Any]) -> None:
    """Katib kept every log scale (0.18+), or the study is refused before it runs.

    Raises:
        ClusterCheckError: Katib dropped `distribution` (Katib < 0.18).
    """
    dropped = dropped_log_scales(sent, returned)
    if dropped:
        raise ClusterCheckError(
            f"parameters {', '.join(dropped)}: this cluster's Katib dropped "
            f"feasibleSpace.distribution={LOG_SCALE} (Katib < 0.18, e.g. Kubeflow 1.9), so they "
            "would be searched uniformly: upgrade Katib to 0.18+ (Kubeflow 1.10+) or give them "
            "scale linear (UNIT_LINEAR_SCALE) in the search space"
        )


def dry_run_experiment(
    custom: Any, body: Mapping[str, Any], *, group: str, version: str, plural: str
) -> dict[str, Any] | None:
    """The Experiment as Katib's webhooks would admit it (nothing stored); None if it exists.

    Raises:
        ClusterCheckError: The API server or a webhook refuses it (their message).
    """
    from kubernetes.client import ApiException

    meta = body["metadata"]
    try:
        return custom.create_namespaced_custom_object(  # type: ignore[no-any-return]
            group, version, meta["namespace"], plural, dict(body), dry_run="All"
        )
    except ApiException as err:
        if err.status == 409:  # it exists: its stored object is checked instead
            return None
        raise ClusterCheckError(
            f"Experiment {meta['namespace']}/{meta['name']}: refused by the API server "
            f"(dry run): {api_error_line(err)}"
        ) from None
