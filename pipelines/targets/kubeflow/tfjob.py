"""The final job as a Training Operator `TFJob` (kubeflow.org/v1): Chief + Workers.

Built through kubeflow-training's typed models from the same `worker_pool_specs` Vertex
gets (pool 0: the chief, one replica; pool 1: the workers), and written with the
`kubernetes` ApiClient's serializer, so what is created is what the models accept.
`tests/tfjob_operator.py` reproduces the `TF_CONFIG` the operator gives each replica. The job
fails as a whole when one replica fails (`restartPolicy: Never`, no retries), cleans up
pods still running, opts out of Istio's sidecar, and names its container `tensorflow` with
port `tfjob-port`. Why each, with the operator's source: docs/kubeflow.md, "The Training
Operator, as its source behaves".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs.replica_env import output_dirs
from pipelines.targets.kubeflow.kube import (
    NO_SIDECAR,
    ReplicaPods,
    container_security_context,
    gpu_env,
    pod_security_context,
)
from pipelines.targets.kubeflow.spot import placement

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TFJob"
PLURAL = "tfjobs"
CONTAINER = "tensorflow"  # kubeflowv1.TFJobDefaultContainerName
PORT_NAME = "tfjob-port"  # kubeflowv1.TFJobDefaultPortName
DEFAULT_PORT = 2222  # kubeflowv1.TFJobDefaultPort
RESTART_POLICY = "Never"
CLEAN_POD_POLICY = "Running"
GPU_RESOURCE = "nvidia.com/gpu"
CHIEF, WORKER = "Chief", "Worker"
DATA_VOLUME = "hpt-data"
FINAL_HEAD = 30  # the most characters of the prefix a final job's name keeps
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class TFJobError(ValueError):
    """A TFJob the Training Operator's webhook would refuse, or bad input (one line)."""


def _container_spec(pool: Mapping[str, Any] | str, what: str) -> Mapping[str, Any]:
    pool = json.loads(pool) if isinstance(pool, str) else pool
    container = pool.get("container_spec") or {}
    if not container.get("image_uri"):
        raise TFJobError(f"{what}: needs container_spec.image_uri (a container image)")
    return pool


def _resources(machine: Mapping[str, Any], cpu: str, memory: str) -> Any:
    from kubernetes import client as k8s

    amounts: dict[str, str] = {"cpu": cpu, "memory": memory}
    count = int(machine.get("accelerator_count") or 0)
    if count > 0 and machine.get("accelerator_type"):
        amounts[GPU_RESOURCE] = str(count)
    return k8s.V1ResourceRequirements(requests=dict(amounts), limits=dict(amounts))


def _replica_spec(
    pool: Mapping[str, Any], replicas: int, base_output_directory: str, pods: ReplicaPods
) -> Any:
    from kubeflow.training import models
    from kubernetes import client as k8s

    container = pool["container_spec"]
    env = {item["name"]: str(item["value"]) for item in container.get("env") or []}
    env.update(output_dirs(base_output_directory))  # where Vertex would put them
    resources = _resources(pool.get("machine_spec") or {}, pods.cpu, pods.memory)
    env.update(gpu_env(resources.limits))
    mounts, volumes = None, None
    if pods.data_pvc:
        mounts = [k8s.V1VolumeMount(name=DATA_VOLUME, mount_path=pods.data_mount_path)]
        claim = k8s.V1PersistentVolumeClaimVolumeSource(claim_name=pods.data_pvc)
        volumes = [k8s.V1Volume(name=DATA_VOLUME, persistent_volume_claim=claim)]
    main = k8s.V1Container(
        name=CONTAINER,
        image=container["image_uri"],
        command=list(container.get("command") or []) or None,
        args=[str(a) for a in container.get("args") or []] or None,
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in env.items()],
        ports=[k8s.V1ContainerPort(name=PORT_NAME, container_port=DEFAULT_PORT)],
        resources=resources,
        volume_mounts=mounts,
        security_context=container_security_context(),
    )
    placed = placement(pods.spot_label)
    pod = k8s.V1PodSpec(
        security_context=pod_security_context(),
        containers=[main],
        service_account_name=pods.service_account or None,
        volumes=volumes,
        node_selector=placed.get("nodeSelector"),
        tolerations=placed.get("tolerations"),
    )
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=replicas,
        restart_policy=RESTART_POLICY,
        template=k8s.V1PodTemplateSpec(
            metadata=k8s.V1ObjectMeta(annotations=dict(NO_SIDECAR)), spec=pod
        ),
    )


def build_tfjob(
    name: str,
    namespace: str,
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    base_output_directory: str,
    pods: ReplicaPods,
    *,
    labels: Mapping[str, str] | None = None,
    active_deadline_seconds: int | None = None,
) -> Any:
    """The final job's `worker_pool_specs` as a `KubeflowOrgV1TFJob`.

    Args:
        name: The TFJob's name (a DNS-1035 label; see `trainjob.trainjob_name`).
        namespace: Where it is created.
        worker_pool_specs: Pool 0 the chief (one replica), pool 1 the workers (optional).
        base_output_directory: The job's output folder; the replicas get
            `AIP_MODEL_DIR`/`AIP_CHECKPOINT_DIR`/`AIP_TENSORBOARD_LOG_DIR` under it as on
            Vertex, so the chief exports to `<base>/model/`.
        pods: Every replica's resources, service account and data claim.
        labels: Extra metadata labels.
        active_deadline_seconds: Fail the job after this long (None: no limit).

    Raises:
        TFJobError: No pools, a chief pool with more than one replica, a pool without
            an image, more than two pools, or a name the webhook would refuse.
    """
    from kubeflow.training import models
    from kubernetes import client as k8s

    pools = _checked_pools(worker_pool_specs)
    replica_specs = {CHIEF: _replica_spec(pools[0], 1, base_output_directory, pods)}
    if len(pools) == 2 and int(pools[1].get("replica_count", 0)) > 0:
        workers = int(pools[1]["replica_count"])
        replica_specs[WORKER] = _replica_spec(pools[1], workers, base_output_directory, pods)
    job = models.KubeflowOrgV1TFJob(
        api_version=API_VERSION,
        kind=KIND,
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels={"app.kubernetes.io/part-of": "hpt-pipeline", **(labels or {})},
        ),
        spec=models.KubeflowOrgV1TFJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(
                clean_pod_policy=CLEAN_POD_POLICY,
                backoff_limit=0,
                active_deadline_seconds=active_deadline_seconds,
            ),
            tf_replica_specs=replica_specs,
        ),
    )
    validate_tfjob(to_manifest(job))
    return job


def _checked_pools(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> list[Any]:
    """The pools decoded, refused (`TFJobError`) unless a one-replica chief and maybe workers."""
    if not worker_pool_specs:
        raise TFJobError("worker_pool_specs: empty, expected pool 0 (the chief)")
    if len(worker_pool_specs) > 2:
        raise TFJobError(
            f"worker_pool_specs: {len(worker_pool_specs)} pools, a TFJob here has a chief "
            "pool and a worker pool (no parameter servers or evaluator)"
        )
    pools = [_container_spec(p, f"worker_pool_specs[{i}]") for i, p in enumerate(worker_pool_specs)]
    if int(pools[0].get("replica_count", 1)) != 1:
        raise TFJobError(
            f"worker_pool_specs[0]: replica_count={pools[0]['replica_count']}, "
            "pool 0 is the chief (1 replica)"
        )
    return pools


def to_manifest(job: Any) -> dict[str, Any]:
    """The TFJob as the JSON the Kubernetes API takes (camelCase, no nulls)."""
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(job)


def validate_tfjob(manifest: Mapping[str, Any]) -> None:
    """The Training Operator webhook's rules for a TFJob.

    From release-1.9 `pkg/webhooks/tensorflow/tfjob_webhook.go` (`validateTFJob`):
    the name is a DNS-1035 label; replica specs exist; each has a container
    named `tensorflow` and every container an image; at most one Chief/Master.

    Raises:
        TFJobError: naming the rule and the value.
    """
    name = (manifest.get("metadata") or {}).get("name", "")
    if len(name) > 63 or not _DNS1035.match(name):
        raise TFJobError(
            f"metadata.name={name!r}: expected a DNS-1035 label (lowercase letters, digits, "
            "-; starts with a letter; at most 63)"
        )
    specs = (manifest.get("spec") or {}).get("tfReplicaSpecs") or {}
    if not specs:
        raise TFJobError("spec.tfReplicaSpecs: must be set")
    chiefs = [t for t in specs if t in (CHIEF, "Master")]
    if len(chiefs) > 1:
        raise TFJobError(f"spec.tfReplicaSpecs: {chiefs}: at most one Chief or Master")
    for rtype, spec in specs.items():
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        if not any(c.get("name") == CONTAINER for c in containers):
            raise TFJobError(f"spec.tfReplicaSpecs.{rtype}: needs a container named {CONTAINER!r}")
        for c in containers:
            if not c.get("image"):
                raise TFJobError(
                    f"spec.tfReplicaSpecs.{rtype}: container {c.get('name')}: no image"
                )
