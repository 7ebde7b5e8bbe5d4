"""The trial template of the Katib Experiment: a `batch/v1` Job running the trial's pool.

Built with the `kubernetes` client models from `worker_pool_specs[0]` (image, command,
args; one replica), with `--<id>=${trialParameters.<id>}` appended exactly as Vertex
appends `--<id>=<value>`, the hypertune metric file and trial id in the environment,
`AIP_*` directories per trial as Vertex sets them, pod resources (cpu/memory, and
`nvidia.com/gpu` for NVIDIA accelerators), the service account and an optional PVC.
`trial_container` is what every trial pod runs, shared with the multi-node trial
(`trial_trainjob.py`); `TrialPods` carries the tune step's cluster settings to both.

Katib's pod webhook rewrites the primary container to `sh -c "<command and args joined
by spaces> && echo completed > <dir>/$$$$.pid"` (`pkg/webhook/v1beta1/pod/utils.go`
l.155-194) and mounts an emptyDir at the metrics file's directory (l.230-240): every
command word must be shell-safe, which is checked here, and the command must be explicit
(`getContainerCommand` would otherwise look the image's entrypoint up in its registry).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs.replica_env import output_dirs
from pipelines.payloads import payload_items
from pipelines.study.search_space import SearchSpace
from pipelines.targets.kubeflow.kube import (
    NO_SIDECAR,
    container_security_context,
    gpu_env,
    pod_security_context,
)
from trainer.contract import DEFAULT_METRIC_FILE, METRIC_FILE_ENV, format_value

METRICS_FILE = DEFAULT_METRIC_FILE  # cloudml-hypertune's default path (one place: the contract)
METRICS_FILE_ENV = METRIC_FILE_ENV
TRIAL_ID_ENV = "CLOUD_ML_TRIAL_ID"
PRIMARY_CONTAINER = "training-container"
TRIAL_NAME_PARAMETER = "trialName"  # a trial parameter bound to ${trialSpec.Name}
GPU_RESOURCE = "nvidia.com/gpu"
# experiments/v1beta1/constants.go: the defaults Katib sets for a batch/v1 Job trial.
JOB_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
JOB_FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")  # shlex.quote leaves these unquoted


class KatibSpecError(ValueError):
    """A study Katib cannot run as given; one line naming the value."""


def placeholder(name: str) -> str:
    """`${trialParameters.<name>}`, what Katib replaces with the trial's value."""
    return "${trialParameters." + name + "}"


def _shell_safe(word: str, what: str) -> None:
    if not _SHELL_SAFE.match(word):
        raise KatibSpecError(
            f"{what} {word!r}: Katib's pod webhook runs the trial command through `sh -c` with "
            "words joined by spaces; use words without spaces or shell characters"
        )


def _resources(machine: Mapping[str, Any], cpu: str, memory: str) -> dict[str, dict[str, str]]:
    amounts = {"cpu": cpu, "memory": memory}
    count = int(float(machine.get("accelerator_count") or 0))
    kind = str(machine.get("accelerator_type") or "")
    if count > 0 and kind:
        if not kind.startswith("NVIDIA_"):
            raise KatibSpecError(
                f"accelerator_type={kind!r}: the kubeflow target requests NVIDIA GPUs "
                f"({GPU_RESOURCE}) only"
            )
        amounts[GPU_RESOURCE] = str(count)
    return {"requests": dict(amounts), "limits": dict(amounts)}


@dataclasses.dataclass(frozen=True)
class TrialPods:
    """Where and how every trial's pods run: the trial pool and the tune step's cluster settings.

    Attributes:
        worker_pool_specs: The trial's pools (`job_specs.trial_job_spec`), as for Vertex: a
            chief and `trial_workers` workers, every replica one pod of the same container.
        cpu: Each trial pod's CPU request and limit.
        memory: Each trial pod's memory request and limit.
        base_output_directory: The study folder; each trial's `AIP_*` folders under it.
        service_account: The pods' service account ("" for the namespace's default).
        pvc_name: A PVC mounted in every trial pod ("" for none).
        data_mount_path: Where it is mounted.
        nodes: Pods per trial (`trial_workers` + 1): 1 is a Job, more a TrainJob
            (`job_kind`); the pools' replicas must add up to it.
        spot_label: The spot pool's node label `key=value` (`trial_scheduling: spot`), or ""
            (`spot.placement`).
    """

    worker_pool_specs: Sequence[Mapping[str, Any] | str]
    cpu: str
    memory: str
    base_output_directory: str = ""
    service_account: str = ""
    pvc_name: str = ""
    data_mount_path: str = ""
    nodes: int = 1
    spot_label: str = ""


@dataclasses.dataclass(frozen=True)
class TrialContainer:
    """What every trial pod runs, whichever kind holds it (a Job or a TrainJob's nodes)."""

    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    resources: dict[str, dict[str, str]]


def trial_container(pods: TrialPods, space: SearchSpace) -> TrialContainer:
    """The trial's chief container with `--<id>=${trialParameters.<id>}` appended, checked.

    Every node of a trial runs the chief pool's container (the workers' pool is the same one,
    `worker_pools.training_worker_pool_specs`); the pools give the node count.

    Raises:
        KatibSpecError: Replicas other than `pods.nodes`, no image or command, a word the pod
            webhook's `sh -c` would split, or a non-NVIDIA accelerator.
    """
    pools = payload_items(pods.worker_pool_specs)
    replicas = sum(int(float(p.get("replica_count", 1))) for p in pools)
    if not pools or replicas != pods.nodes:
        raise KatibSpecError(
            f"worker_pool_specs: {replicas} replicas, expected {pods.nodes}; a Katib trial here "
            f"runs one pod per node (a chief and trial_workers={pods.nodes - 1} workers)"
        )
    container_spec = pools[0].get("container_spec") or {}
    image = container_spec.get("image_uri")
    command = [str(c) for c in container_spec.get("command") or []]
    if not image or not command:
        raise KatibSpecError(
            "worker_pool_specs[0].container_spec: needs image_uri and command (the pod webhook "
            "wraps the command; it cannot run an image's entrypoint unresolved)"
        )
    args = [str(a) for a in container_spec.get("args") or []]
    for word in [*command, *args]:
        _shell_safe(word, "trial command word")
    for p in space.all_parameters():
        for value in p.values:
            _shell_safe(format_value(value), f"parameter {p.parameter_id!r} value")
    args += [f"--{p.parameter_id}={placeholder(p.parameter_id)}" for p in space.parameters]
    trial = placeholder(TRIAL_NAME_PARAMETER)
    env = {item["name"]: str(item["value"]) for item in container_spec.get("env") or []}
    env.update({METRICS_FILE_ENV: METRICS_FILE, TRIAL_ID_ENV: trial})
    if pods.base_output_directory:  # Vertex's per-trial AIP_* directories: <base>/<trial>/...
        env.update(output_dirs(pods.base_output_directory, trial))
    resources = _resources(pools[0].get("machine_spec") or {}, pods.cpu, pods.memory)
    env.update(gpu_env(resources["limits"]))
    if pods.pvc_name and not pods.data_mount_path.startswith("/"):
        raise KatibSpecError(f"data_mount_path={pods.data_mount_path!r}: expected an absolute path")
    return TrialContainer(str(image), command, args, env, resources)


def trial_job(
    pods: TrialPods, space: SearchSpace, pod_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The trial's `batch/v1` Job: the trial pool's container with `--<id>=${trialParameters.<id>}`.

    Built with the `kubernetes` client models and serialized by its `ApiClient`. Its pods
    carry `pod_labels` (the tune step finds them by its experiment label), run as the
    pipeline's non-root uid, and see no GPU when they ask for none. On spot capacity they
    run on the spot pool, and a preempted pod is replaced rather than failing the trial.
    """
    from kubernetes import client

    from pipelines.targets.kubeflow import spot

    made = trial_container(pods, space)
    mounts, volumes = None, None
    if pods.pvc_name:
        mounts = [client.V1VolumeMount(name="data", mount_path=pods.data_mount_path)]
        volumes = [
            client.V1Volume(
                name="data",
                persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                    claim_name=pods.pvc_name
                ),
            )
        ]
    container = client.V1Container(
        name=PRIMARY_CONTAINER,
        image=made.image,
        command=made.command,
        args=made.args,
        env=[client.V1EnvVar(name=k, value=v) for k, v in made.env.items()],
        resources=client.V1ResourceRequirements(**made.resources),
        volume_mounts=mounts,
        security_context=container_security_context(),
    )
    placed = spot.placement(pods.spot_label)
    job = client.V1Job(
        api_version="batch/v1",
        kind="Job",
        spec=client.V1JobSpec(
            backoff_limit=0,  # a failed trial is failed, as on Vertex; a preempted one is not
            pod_failure_policy=spot.PREEMPTED_POD_IGNORED if placed else None,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(
                    annotations=dict(NO_SIDECAR), labels=dict(pod_labels or {}) or None
                ),
                spec=client.V1PodSpec(
                    security_context=pod_security_context(),
                    containers=[container],
                    restart_policy="Never",
                    service_account_name=pods.service_account or None,
                    volumes=volumes,
                    node_selector=placed.get("nodeSelector"),
                    tolerations=placed.get("tolerations"),
                ),
            ),
        ),
    )
    return client.ApiClient().sanitize_for_serialization(job)  # type: ignore[no-any-return]
