"""Run the final job as a TFJob: create it (or reuse it), wait, and report its replicas.

`run_final_job` is what the `train_with_tfjob` component does, with the
Kubernetes API injectable so tests replace the API call, never this logic. The
job's name follows from its output folder (`tfjob.tfjob_name`), so a retried
task finds the job it started and waits on it instead of starting another.
A cancelled run's SIGTERM deletes the TFJob (`kube.deleted_on_sigterm`), and the
Training Operator's pods with it; a rerun creates it afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.targets.kubeflow import cluster_checks, kube, tfjob
from pipelines.targets.kubeflow.waiting import KubeflowJobError, last_true_condition, wait_for

DEFAULT_TIMEOUT_S = 24 * 3600
DEFAULT_POLL_S = 15.0


def replica_summary(obj: Mapping[str, Any]) -> str:
    """`Chief 1 active, Worker 2 active 1 failed` from `status.replicaStatuses`."""
    statuses = (obj.get("status") or {}).get("replicaStatuses") or {}
    parts = []
    for rtype in sorted(statuses):
        counts = statuses[rtype] or {}
        shown = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
        parts.append(f"{rtype} {', '.join(shown) or 'pending'}")
    return "; ".join(parts) or "no replicas yet"


def progress_printer(echo: Callable[[str], None] = print) -> Callable[[dict[str, Any]], None]:
    """An `on_status` callback printing a line when the state or the replica counts change."""
    last: list[str] = []

    def on_status(obj: dict[str, Any]) -> None:
        cond = last_true_condition(obj)
        state = cond.get("type", "?") if cond else "Pending"
        line = f"{tfjob.KIND} {obj['metadata'].get('name')}: {state} ({replica_summary(obj)})"
        if not last or last[-1] != line:
            last.append(line)
            echo(line)

    return on_status


def run_final_job(
    *,
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    base_output_directory: str,
    display_name: str,
    namespace: str,
    cpu: str,
    memory: str,
    service_account: str | None = None,
    data_pvc: str | None = None,
    data_mount_path: str = "/mnt/hpt",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = DEFAULT_POLL_S,
    api: Any = None,
    core_api: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = print,
    gpu_setting: str = "final_accelerator_count",
) -> dict[str, Any]:
    """Create (or reuse) the final TFJob and wait until it succeeds.

    Args:
        worker_pool_specs: The final job's pools (chief, workers).
        base_output_directory: Its output folder; the chief exports to `<base>/model/`.
        display_name: Start of the job's name.
        namespace: Where the TFJob is created.
        cpu: Each replica's CPU request and limit.
        memory: Each replica's memory request and limit.
        service_account: The replicas' service account (None or "": the default).
        data_pvc: A PVC mounted in every replica (None or "": none).
        data_mount_path: Where `data_pvc` is mounted.
        timeout_s: Longest wait; also the job's `activeDeadlineSeconds`, so the
            operator stops it when the wait gives up.
        poll_s: Seconds between status reads.
        api: A `CustomObjectsApi`; default `kube.custom_objects_api()`.
        core_api: A `CoreV1Api` for the cluster checks; default `kube.core_v1_api()`.
        clock: Monotonic clock (tests).
        sleep: Sleep (tests).
        echo: Where progress lines go.
        gpu_setting: The setting a missing GPU is blamed on (the features job: the trials').

    Returns:
        The succeeded TFJob object.

    Raises:
        KubeflowJobError: The job failed (the operator's message) or timed out; one line.
        tfjob.TFJobError: The pools do not make a TFJob the operator accepts.
        cluster_checks.ClusterCheckError: The cluster cannot run it, before it is created.
        SystemExit: SIGTERM (the run cancelled): the TFJob was deleted; status 143.
    """
    from kubernetes.client import ApiException

    name = tfjob.tfjob_name(display_name, base_output_directory)
    job = tfjob.build_tfjob(
        name,
        namespace,
        worker_pool_specs,
        base_output_directory,
        cpu=cpu,
        memory=memory,
        service_account=service_account or None,
        data_pvc=data_pvc or None,
        data_mount_path=data_mount_path,
        active_deadline_seconds=int(timeout_s),
    )
    api = api if api is not None else kube.custom_objects_api()
    core_api = core_api if core_api is not None else kube.core_v1_api()
    cluster_checks.check_pods_can_run(
        core_api,
        api,
        namespace=namespace,
        worker_pool_specs=worker_pool_specs,
        pvc_name=data_pvc or "",
        pvc_mount_path=data_mount_path,
        gpu_setting=gpu_setting,
        echo=echo,
    )
    # The chief's export must reach this step's pod (it describes the model next).
    cluster_checks.check_shared_path(
        base_output_directory, "base_output_directory", data_pvc or "", data_mount_path
    )
    where = dict(group=tfjob.GROUP, version=tfjob.VERSION, plural=tfjob.PLURAL)
    with kube.deleted_on_sigterm(api, **where, namespace=namespace, name=name, echo=echo):
        try:
            _, created = kube.create_or_get(api, body=tfjob.to_manifest(job), **where)
        except ApiException as err:
            raise KubeflowJobError(
                f"{tfjob.KIND} {namespace}/{name}: not created ({kube.api_error_line(err)})"
            ) from None
        echo(
            f"{tfjob.KIND} {namespace}/{name}: {'created' if created else 'exists, waiting on it'}"
        )

        def get() -> dict[str, Any]:
            return api.get_namespaced_custom_object(
                where["group"], where["version"], namespace, where["plural"], name
            )

        try:
            return wait_for(
                get,
                timeout_s=timeout_s,
                poll_s=poll_s,
                clock=clock,
                sleep=sleep,
                on_status=progress_printer(echo),
            )
        except KubeflowJobError as err:
            if created:
                raise
            raise KubeflowJobError(
                f"{err} (the job existed before this task: `kubectl delete tfjob -n {namespace} "
                f"{name}` to start afresh)"
            ) from None
