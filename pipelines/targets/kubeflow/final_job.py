"""Run the final job as a TFJob or a TrainJob: create it (or reuse it), wait, report its replicas.

`run_final_job` is what the `train_with_tfjob` component does, with the
Kubernetes API injectable so tests replace the API call, never this logic. Which API
(`kubeflow_job_api`) is resolved against the cluster first (`job_api`). The
job's name follows from its output folder (`trainjob.trainjob_name`), so a retried
task finds the job it started and waits on it instead of starting another.
A cancelled run's SIGTERM deletes the job (`kube.deleted_on_sigterm`), and its pods
with it; so does a pod that cannot run (`pod_watch`); a rerun creates it afresh.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.payloads import payload_items
from pipelines.targets.kubeflow import (
    cluster_checks,
    job_api,
    job_kind,
    kube,
    pod_watch,
    tfjob,
    trainjob,
    trainjob_checks,
)
from pipelines.targets.kubeflow.waiting import KubeflowJobError, last_true_condition, wait_for

DEFAULT_TIMEOUT_S = 24 * 3600
DEFAULT_POLL_S = 15.0
DEFAULT_PENDING_GRACE_S = 600.0


def replica_summary(obj: Mapping[str, Any]) -> str:
    """`Chief 1 active, Worker 2 active 1 failed` from `status.replicaStatuses`."""
    statuses = (obj.get("status") or {}).get("replicaStatuses") or {}
    parts = []
    for rtype in sorted(statuses):
        counts = statuses[rtype] or {}
        shown = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
        parts.append(f"{rtype} {', '.join(shown) or 'pending'}")
    return "; ".join(parts) or "no replicas yet"


def progress_printer(
    echo: Callable[[str], None] = print, kind: str = tfjob.KIND
) -> Callable[[dict[str, Any]], None]:
    """An `on_status` callback printing a line when the state or the replica counts change."""
    last: list[str] = []

    def on_status(obj: dict[str, Any]) -> None:
        cond = last_true_condition(obj)
        state = cond.get("type", "?") if cond else "Pending"
        line = f"{kind} {obj['metadata'].get('name')}: {state} ({replica_summary(obj)})"
        if not last or last[-1] != line:
            last.append(line)
            echo(line)

    return on_status


@dataclasses.dataclass(frozen=True)
class FinalJobRequest:
    """What the train (or features) step asks for: the pools, where they run, how long.

    Attributes:
        worker_pool_specs: The final job's pools (chief, workers).
        base_output_directory: Its output folder; the chief exports to `<base>/model/`.
        display_name: Start of the job's name.
        namespace: Where the job is created.
        cpu: Each replica's CPU request and limit.
        memory: Each replica's memory request and limit.
        service_account: The replicas' service account (None or "": the default).
        data_pvc: A PVC mounted in every replica (None or "": none).
        data_mount_path: Where `data_pvc` is mounted.
        job_api_setting: `kubeflow_job_api`: tfjob, trainjob or auto (`job_api.resolve`).
        timeout_s: Longest wait; also a TFJob's `activeDeadlineSeconds`, so the
            operator stops it when the wait gives up.
        poll_s: Seconds between status reads (and pod checks).
        pending_grace_s: How long a replica's pod may stay Pending (`pod_watch`).
        gpu_setting: The setting a missing GPU is blamed on (the features job: the trials').
        spot_label: The spot pool's node label for the replicas, or "" (`spot`).
    """

    worker_pool_specs: Sequence[Mapping[str, Any] | str]
    base_output_directory: str
    display_name: str
    namespace: str
    cpu: str
    memory: str
    service_account: str | None = None
    data_pvc: str | None = None
    data_mount_path: str = "/mnt/hpt"
    job_api_setting: str = job_api.TFJOB
    timeout_s: float = DEFAULT_TIMEOUT_S
    poll_s: float = DEFAULT_POLL_S
    pending_grace_s: float = DEFAULT_PENDING_GRACE_S
    gpu_setting: str = "final_accelerator_count"
    spot_label: str = ""

    def pod(self) -> kube.ReplicaPods:
        """What the builders give every replica's pod."""
        return kube.ReplicaPods(
            cpu=self.cpu,
            memory=self.memory,
            service_account=self.service_account or None,
            data_pvc=self.data_pvc or None,
            data_mount_path=self.data_mount_path,
            spot_label=self.spot_label,
        )


@dataclasses.dataclass(frozen=True)
class _Job:
    """The object to create and how to read it: kind, API coordinates, end states, pods."""

    kind: str
    where: dict[str, str]
    body: dict[str, Any]
    succeeded: tuple[str, ...]
    failed: tuple[str, ...]
    selector: str


def run_final_job(
    request: FinalJobRequest,
    *,
    api: Any = None,
    core_api: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], Any] | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Create (or reuse) the final TFJob or TrainJob and wait until it succeeds.

    Args:
        request: The job (`FinalJobRequest`).
        api: A `CustomObjectsApi`; default `kube.custom_objects_api()`.
        core_api: A `CoreV1Api` for the cluster checks; default `kube.core_v1_api()`.
        clock: Monotonic clock (tests).
        sleep: Sleep (tests).
        now: Wall-clock UTC time for pod ages (tests; default: now).
        echo: Where progress lines go.

    Returns:
        The succeeded job object.

    Raises:
        KubeflowJobError: The job failed (the controller's message), a pod cannot run
            (`pod_watch.PodProblem`: the job is deleted) or it timed out; one line.
        tfjob.TFJobError: The pools do not make a job the controller accepts.
        cluster_checks.ClusterCheckError: The cluster cannot run it, before it is created.
        SystemExit: SIGTERM (the run cancelled): the job was deleted; status 143.
    """
    r = request
    nodes = sum(int(p.get("replica_count", 1)) for p in payload_items(r.worker_pool_specs))
    name = trainjob.trainjob_name(r.display_name, r.base_output_directory, nodes)
    if r.job_api_setting == job_api.TFJOB:  # refused before any call, as it always was
        tfjob.build_tfjob(name, r.namespace, r.worker_pool_specs, r.base_output_directory, r.pod())
    api = api if api is not None else kube.custom_objects_api()
    core_api = core_api if core_api is not None else kube.core_v1_api()
    chosen = _check_cluster(r, api, core_api, echo)
    job = _job(r, name, job_kind.kinds(chosen).final, api, echo)
    watch = pod_watch.watcher(
        core_api,
        r.namespace,
        job.selector,
        grace_s=r.pending_grace_s,
        then=progress_printer(echo, job.kind),
        echo=echo,
        **({"now": now} if now is not None else {}),
    )
    timing = dict(timeout_s=r.timeout_s, poll_s=r.poll_s, clock=clock, sleep=sleep)
    return _create_and_wait(api, job, name, r.namespace, watch, timing, echo)


def _check_cluster(r: FinalJobRequest, api: Any, core_api: Any, echo: Callable[[str], None]) -> str:
    """Refuse a job the cluster cannot run, or whose export this step could not read.

    Returns:
        The job API `check_pods_can_run` chose.
    """
    chosen = cluster_checks.check_pods_can_run(
        core_api,
        api,
        namespace=r.namespace,
        worker_pool_specs=r.worker_pool_specs,
        pvc_name=r.data_pvc or "",
        data_mount_path=r.data_mount_path,
        gpu_setting=r.gpu_setting,
        job_api_setting=r.job_api_setting,
        echo=echo,
    )
    # The chief's export must reach this step's pod (it describes the model next).
    cluster_checks.check_shared_path(
        r.base_output_directory, "base_output_directory", r.data_pvc or "", r.data_mount_path
    )
    return chosen


def _job(r: FinalJobRequest, name: str, kind: str, api: Any, echo: Callable[[str], None]) -> _Job:
    """The TrainJob (in the cluster's override field, its runtime checked) or the TFJob."""
    if kind == job_kind.TRAINJOB:
        field = trainjob_checks.trainjob_override_field(api)
        body = trainjob.build_trainjob(
            name,
            r.namespace,
            r.worker_pool_specs,
            r.base_output_directory,
            r.pod(),
            override_field=field,
        )
        trainjob_checks.check_runtime(api, echo)
        where = dict(group=trainjob.GROUP, version=trainjob.VERSION, plural=trainjob.PLURAL)
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        return _Job(trainjob.KIND, where, body, trainjob.SUCCEEDED, trainjob.FAILED, selector)
    built = tfjob.build_tfjob(
        name,
        r.namespace,
        r.worker_pool_specs,
        r.base_output_directory,
        r.pod(),
        active_deadline_seconds=int(r.timeout_s),
    )
    where = dict(group=tfjob.GROUP, version=tfjob.VERSION, plural=tfjob.PLURAL)
    selector = f"training.kubeflow.org/job-name={name}"
    return _Job(tfjob.KIND, where, tfjob.to_manifest(built), ("Succeeded",), ("Failed",), selector)


def _create_and_wait(
    api: Any,
    job: _Job,
    name: str,
    namespace: str,
    watch: Callable[[dict[str, Any]], None],
    timing: dict[str, Any],
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """Create (or find) the job and wait on it; a pod that cannot run deletes it."""
    from kubernetes.client import ApiException

    kind, where = job.kind, job.where
    with kube.deleted_on_sigterm(api, **where, namespace=namespace, name=name, echo=echo):
        try:
            _, created = kube.create_or_get(api, body=job.body, **where)
        except ApiException as err:
            raise KubeflowJobError(
                f"{kind} {namespace}/{name}: not created ({kube.api_error_line(err)})"
            ) from None
        echo(f"{kind} {namespace}/{name}: {'created' if created else 'exists, waiting on it'}")

        def get() -> dict[str, Any]:
            return api.get_namespaced_custom_object(  # type: ignore[no-any-return]
                where["group"], where["version"], namespace, where["plural"], name
            )

        try:
            return wait_for(
                get, succeeded=job.succeeded, failed=job.failed, on_status=watch, **timing
            )
        except pod_watch.PodProblem as err:
            kube.delete_custom_object(api, **where, namespace=namespace, name=name, echo=echo)
            raise pod_watch.PodProblem(f"{err}; {kind} {namespace}/{name} deleted") from None
        except KubeflowJobError as err:
            if created:
                raise
            raise KubeflowJobError(
                f"{err} (the job existed before this task: `kubectl delete {kind.lower()} -n "
                f"{namespace} {name}` to start afresh)"
            ) from None
