"""Run the final job as a TFJob or a TrainJob: create it (or reuse it), wait, report its replicas.

`run_final_job` is what the `train_with_tfjob` component does, with the
Kubernetes API injectable so tests replace the API call, never this logic. Which API
(`kubeflow_job_api`) is resolved against the cluster first (`job_api`). The
job's name follows from its output folder (`tfjob.tfjob_name`), so a retried
task finds the job it started and waits on it instead of starting another.
A cancelled run's SIGTERM deletes the job (`kube.deleted_on_sigterm`), and its pods
with it; so does a pod that cannot run (`pod_watch`); a rerun creates it afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.targets.kubeflow import cluster_checks, job_api, kube, pod_watch, tfjob, trainjob
from pipelines.targets.kubeflow.waiting import KubeflowJobError, last_true_condition, wait_for

DEFAULT_TIMEOUT_S = 24 * 3600
DEFAULT_POLL_S = 15.0
DEFAULT_PENDING_GRACE_S = 600.0
OPENAPI_PATH = f"/openapi/v3/apis/{trainjob.GROUP}/{trainjob.VERSION}"


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


def trainjob_override_field(custom: Any) -> str:
    """The cluster's TrainJob override field, from its OpenAPI document (`trainjob.override_field`).

    Raises:
        KubeflowJobError: The document names neither field (one line).
    """
    from kubernetes.client import ApiException

    try:
        document = custom.api_client.call_api(
            OPENAPI_PATH,
            "GET",
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as err:
        raise KubeflowJobError(f"{OPENAPI_PATH}: {kube.api_error_line(err)}") from None
    field = trainjob.override_field(document or {})
    if field is None:
        raise KubeflowJobError(
            f"{OPENAPI_PATH}: the TrainJob schema has neither "
            f"{' nor '.join(trainjob.OVERRIDE_FIELDS)}: expected Kubeflow Trainer v2.1 or later"
        )
    return field


def check_runtime(custom: Any, echo: Callable[[str], None] = print) -> None:
    """The TensorFlow ClusterTrainingRuntime is installed (403: said and not checked).

    Raises:
        KubeflowJobError: It is not, naming the file that installs it.
    """
    from kubernetes.client import ApiException

    plural = trainjob.RUNTIME_PLURALS[trainjob.CLUSTER_RUNTIME]
    what = f"{trainjob.CLUSTER_RUNTIME} {trainjob.RUNTIME_NAME}"
    try:
        custom.get_cluster_custom_object(
            trainjob.GROUP, trainjob.VERSION, plural, trainjob.RUNTIME_NAME
        )
    except ApiException as err:
        if err.status == 403:
            echo(f"{what}: not readable by this service account, not checked")
            return
        if err.status == 404:
            raise KubeflowJobError(
                f"{what}: not installed; apply the trainjob/trainingruntime.yaml that "
                "`hpt-pipeline manifests --target kubeflow` writes (cluster admin)"
            ) from None
        raise KubeflowJobError(f"{what}: {kube.api_error_line(err)}") from None
    echo(f"{what}: installed")


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
    job_api_setting: str = job_api.TFJOB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = DEFAULT_POLL_S,
    pending_grace_s: float = DEFAULT_PENDING_GRACE_S,
    api: Any = None,
    core_api: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], Any] | None = None,
    echo: Callable[[str], None] = print,
    gpu_setting: str = "final_accelerator_count",
) -> dict[str, Any]:
    """Create (or reuse) the final TFJob or TrainJob and wait until it succeeds.

    Args:
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
        api: A `CustomObjectsApi`; default `kube.custom_objects_api()`.
        core_api: A `CoreV1Api` for the cluster checks; default `kube.core_v1_api()`.
        clock: Monotonic clock (tests).
        sleep: Sleep (tests).
        now: Wall-clock UTC time for pod ages (tests; default: now).
        echo: Where progress lines go.
        gpu_setting: The setting a missing GPU is blamed on (the features job: the trials').

    Returns:
        The succeeded job object.

    Raises:
        KubeflowJobError: The job failed (the controller's message), a pod cannot run
            (`pod_watch.PodProblem`: the job is deleted) or it timed out; one line.
        tfjob.TFJobError: The pools do not make a job the controller accepts.
        cluster_checks.ClusterCheckError: The cluster cannot run it, before it is created.
        SystemExit: SIGTERM (the run cancelled): the job was deleted; status 143.
    """
    from kubernetes.client import ApiException

    name = tfjob.tfjob_name(display_name, base_output_directory)
    pod = dict(
        cpu=cpu,
        memory=memory,
        service_account=service_account or None,
        data_pvc=data_pvc or None,
        data_mount_path=data_mount_path,
    )
    if job_api_setting == job_api.TFJOB:  # refused before any call, as it always was
        tfjob.build_tfjob(name, namespace, worker_pool_specs, base_output_directory, **pod)  # type: ignore[arg-type]
    api = api if api is not None else kube.custom_objects_api()
    core_api = core_api if core_api is not None else kube.core_v1_api()
    chosen = cluster_checks.check_pods_can_run(
        core_api,
        api,
        namespace=namespace,
        worker_pool_specs=worker_pool_specs,
        pvc_name=data_pvc or "",
        pvc_mount_path=data_mount_path,
        gpu_setting=gpu_setting,
        job_api_setting=job_api_setting,
        echo=echo,
    )
    # The chief's export must reach this step's pod (it describes the model next).
    cluster_checks.check_shared_path(
        base_output_directory, "base_output_directory", data_pvc or "", data_mount_path
    )
    if chosen == job_api.TRAINJOB:
        field = trainjob_override_field(api)
        body = trainjob.build_trainjob(
            name,
            namespace,
            worker_pool_specs,
            base_output_directory,
            override_field=field,
            **pod,  # type: ignore[arg-type]
        )
        check_runtime(api, echo)
        kind, group, version, plural = (
            trainjob.KIND,
            trainjob.GROUP,
            trainjob.VERSION,
            trainjob.PLURAL,
        )
        succeeded, failed = trainjob.SUCCEEDED, trainjob.FAILED
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    else:
        job = tfjob.build_tfjob(
            name,
            namespace,
            worker_pool_specs,
            base_output_directory,
            active_deadline_seconds=int(timeout_s),
            **pod,  # type: ignore[arg-type]
        )
        body = tfjob.to_manifest(job)
        kind, group, version, plural = tfjob.KIND, tfjob.GROUP, tfjob.VERSION, tfjob.PLURAL
        succeeded, failed = ("Succeeded",), ("Failed",)
        selector = f"training.kubeflow.org/job-name={name}"
    where = dict(group=group, version=version, plural=plural)
    with kube.deleted_on_sigterm(api, **where, namespace=namespace, name=name, echo=echo):
        try:
            _, created = kube.create_or_get(api, body=body, **where)
        except ApiException as err:
            raise KubeflowJobError(
                f"{kind} {namespace}/{name}: not created ({kube.api_error_line(err)})"
            ) from None
        echo(f"{kind} {namespace}/{name}: {'created' if created else 'exists, waiting on it'}")

        def get() -> dict[str, Any]:
            return api.get_namespaced_custom_object(group, version, namespace, plural, name)  # type: ignore[no-any-return]

        watch = pod_watch.watcher(
            core_api,
            namespace,
            selector,
            grace_s=pending_grace_s,
            then=progress_printer(echo, kind),
            echo=echo,
            **({"now": now} if now is not None else {}),
        )
        try:
            return wait_for(
                get,
                succeeded=succeeded,
                failed=failed,
                timeout_s=timeout_s,
                poll_s=poll_s,
                clock=clock,
                sleep=sleep,
                on_status=watch,
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
