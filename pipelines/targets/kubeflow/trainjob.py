"""The final job as a Kubeflow Trainer v2 `TrainJob`, and the TensorFlow runtime it refers to.

Trainer v2 ships no TensorFlow runtime and its PlainML plugin sets no `TF_CONFIG`, so the
pipeline brings both halves: `runtime_manifest` is a `ClusterTrainingRuntime` (or a
namespaced `TrainingRuntime`) whose JobSet has one replicated job `node` (Indexed pods with
stable host names `<trainjob>-node-0-<i>.<trainjob>`, published before they are ready, so
the workers find each other while they start), and `build_trainjob` sets `numNodes` = 1 +
workers and, in the env, the node count and address pattern from which the trainer forms
`TF_CONFIG` (`trainer.cluster`: worker 0 is the chief and exports). The claim, the service
account and the Istio opt-out go through the TrainJob's override field, which changed name:
`podTemplateOverrides` in Trainer v2.1, `runtimePatches` from v2.2 (`override_field`
reads which one the cluster's API has). The job waits on `Complete` / `Failed`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs.replica_env import output_dirs
from pipelines.payloads import payload_items
from pipelines.targets.kubeflow.kube import (
    NO_SIDECAR,
    ReplicaPods,
    container_security,
    gpu_env,
    jobset_longest_pod_name,
    jobset_name_room,
    pod_security,
    stable_name,
)
from pipelines.targets.kubeflow.spot import placement
from pipelines.targets.kubeflow.tfjob import FINAL_HEAD, GPU_RESOURCE, TFJobError
from trainer.cluster import NODE_ADDRESS_ENV, NUM_NODES_ENV

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainJob"
PLURAL = "trainjobs"
CLUSTER_RUNTIME, RUNTIME = "ClusterTrainingRuntime", "TrainingRuntime"
RUNTIME_PLURALS = {CLUSTER_RUNTIME: "clustertrainingruntimes", RUNTIME: "trainingruntimes"}
RUNTIME_NAME = "hpt-tensorflow-distributed"
NODE = "node"  # the replicated job and container Trainer v2 fills (constants.Node)
ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
PORT = 2222  # MultiWorkerMirroredStrategy's collective port in TF_CONFIG
PATCH_MANAGER = "hpt-pipeline"  # runtimePatches entries are keyed by their manager
V21_OVERRIDES, PATCHES = "podTemplateOverrides", "runtimePatches"
OVERRIDE_FIELDS = (V21_OVERRIDES, PATCHES)
SUCCEEDED, FAILED = ("Complete",), ("Failed",)
DATA_VOLUME = "hpt-data"


def trainjob_name(prefix: str, base_output_directory: str, nodes: int = 1) -> str:
    """The final job's stable DNS-1035 name, whichever kind runs it (a retried task reuses the job).

    The readable prefix (its first 30 characters), `final` and a digest of the output folder;
    shorter where JobSet's pod name rule needs it (`kube.jobset_name_room`): its head is cut
    only past 100 nodes.
    """
    head = min(FINAL_HEAD, _room(nodes) - len("-final-") - 10)  # stable_name's role and digest
    return stable_name(prefix, base_output_directory, "final", head)


def _room(nodes: int) -> int:
    return jobset_name_room(NODE, nodes)


def runtime_manifest(*, name: str = RUNTIME_NAME, namespace: str | None = None) -> dict[str, Any]:
    """The TensorFlow runtime: a ClusterTrainingRuntime, or a TrainingRuntime in `namespace`.

    One replicated job `node` (one Indexed Job whose pods Trainer v2 counts from the
    TrainJob's `numNodes`), headless-service addresses published before readiness, pods
    that fail as a whole at the first failure (`backoffLimit: 0`, `restartPolicy: Never`),
    run as the pipeline's non-root uid and opt out of Istio's sidecar.
    """
    kind = RUNTIME if namespace else CLUSTER_RUNTIME
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {"trainer.kubeflow.org/framework": "tensorflow"},
    }
    if namespace:
        metadata["namespace"] = namespace
    container = {
        "name": NODE,
        "ports": [{"name": "tf-port", "containerPort": PORT}],
        "securityContext": container_security(),
    }
    pod = {
        "metadata": {"annotations": dict(NO_SIDECAR)},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": pod_security(),
            "containers": [container],
        },
    }
    job = {"metadata": {"labels": dict(ANCESTOR)}, "spec": {"backoffLimit": 0, "template": pod}}
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "replicatedJobs": [{"name": NODE, "replicas": 1, "template": job}],
                }
            },
        },
    }


def _one_node_container(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> tuple[dict, int]:
    """(the pools' shared container spec and machine, number of nodes); TFJobError otherwise."""
    pools = payload_items(worker_pool_specs)
    if not pools:
        raise TFJobError("worker_pool_specs: empty, expected pool 0 (the chief)")
    if len(pools) > 2:
        raise TFJobError(
            f"worker_pool_specs: {len(pools)} pools, a TrainJob here has one node pool "
            "(chief and workers alike; no parameter servers or evaluator)"
        )
    first = pools[0]
    if not (first.get("container_spec") or {}).get("image_uri"):
        raise TFJobError("worker_pool_specs[0]: needs container_spec.image_uri (a container image)")
    if int(first.get("replica_count", 1)) != 1:
        raise TFJobError(
            f"worker_pool_specs[0]: replica_count={first['replica_count']}, pool 0 is the "
            "chief (1 replica)"
        )
    workers = int(pools[1].get("replica_count", 0)) if len(pools) == 2 else 0
    if workers and (
        pools[1].get("container_spec") != first.get("container_spec")
        or pools[1].get("machine_spec") != first.get("machine_spec")
    ):
        raise TFJobError(
            "worker_pool_specs[1]: differs from pool 0 in container or machine; a TrainJob's "
            "nodes share one template (use kubeflow_job_api: tfjob for distinct pools)"
        )
    return dict(first), 1 + workers


def pod_override(
    service_account: str | None,
    data_pvc: str | None,
    data_mount_path: str,
    labels: Mapping[str, str] | None = None,
    placement: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod metadata, pod spec) the override field carries: no Istio, labels, claim, account.

    `placement`: the spot pool's node selector and toleration (`spot.placement`), or None.
    """
    spec: dict[str, Any] = dict(placement or {})
    if service_account:
        spec["serviceAccountName"] = service_account
    if data_pvc:
        spec["volumes"] = [{"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": data_pvc}}]
        mount = {"name": DATA_VOLUME, "mountPath": data_mount_path}
        spec["containers"] = [{"name": NODE, "volumeMounts": [mount]}]
    metadata: dict[str, Any] = {"annotations": dict(NO_SIDECAR)}
    if labels:
        metadata["labels"] = dict(labels)
    return metadata, spec


def override(field: str, metadata: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The override entry in `field`'s shape (Trainer v2.1 or v2.2+)."""
    if field == V21_OVERRIDES:
        return [{"targetJobs": [{"name": NODE}], "metadata": metadata, "spec": spec}]
    if field == PATCHES:
        pod = {"metadata": metadata, "spec": spec}
        job = {"name": NODE, "template": {"spec": {"template": pod}}}
        runtime = {"template": {"spec": {"replicatedJobs": [job]}}}
        return [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": runtime}]
    raise TFJobError(f"override field {field!r}: expected one of {', '.join(OVERRIDE_FIELDS)}")


def node_address(name: str) -> str:
    """`HPT_NODE_ADDRESS` for the TrainJob `name`: JobSet host names, `{index}` per node."""
    return f"{name}-{NODE}-0-{{index}}.{name}:{PORT}"


def trainer_spec(
    image: str,
    command: Sequence[str],
    args: Sequence[str],
    env: Mapping[str, str],
    amounts: Mapping[str, str],
    nodes: int,
) -> dict[str, Any]:
    """The TrainJob's `trainer`: every node's container, requests = limits = `amounts`."""
    trainer: dict[str, Any] = {"image": image, "numNodes": nodes}
    if command:
        trainer["command"] = [str(c) for c in command]
    if args:
        trainer["args"] = [str(a) for a in args]
    trainer["env"] = [{"name": k, "value": v} for k, v in env.items()]
    trainer["resourcesPerNode"] = {"requests": dict(amounts), "limits": dict(amounts)}
    return trainer


def trainjob_spec(
    trainer: dict[str, Any],
    override_field: str,
    pod: tuple[dict[str, Any], dict[str, Any]],
    runtime: str = RUNTIME_NAME,
    runtime_kind: str = CLUSTER_RUNTIME,
) -> dict[str, Any]:
    """A TrainJob's `spec`: the runtime it refers to, `trainer`, and `pod` in `override_field`."""
    return {
        "runtimeRef": {"apiGroup": GROUP, "kind": runtime_kind, "name": runtime},
        "trainer": trainer,
        override_field: override(override_field, *pod),
    }


def build_trainjob(
    name: str,
    namespace: str,
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    base_output_directory: str,
    pods: ReplicaPods,
    *,
    override_field: str,
    runtime: str = RUNTIME_NAME,
    runtime_kind: str = CLUSTER_RUNTIME,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The final job's `worker_pool_specs` as a TrainJob (the JSON the API takes).

    Args:
        name: The TrainJob's name (a DNS-1035 label: `trainjob_name`).
        namespace: Where it is created.
        worker_pool_specs: Pool 0 the chief (one replica), pool 1 the workers, alike.
        base_output_directory: Output folder; `AIP_MODEL_DIR` etc. under it, as on Vertex.
        pods: Every node's resources, service account and data claim.
        override_field: `podTemplateOverrides` (Trainer v2.1) or `runtimePatches` (v2.2+).
        runtime: The training runtime's name (`runtime_manifest`).
        runtime_kind: ClusterTrainingRuntime or TrainingRuntime.
        labels: Extra metadata labels.

    Raises:
        TFJobError: Pools that make no TrainJob, or an unknown override field (one line).
    """
    pool, nodes = _one_node_container(worker_pool_specs)
    if len(name) > _room(nodes):
        longest = jobset_longest_pod_name(name, NODE, 1, nodes)
        raise TFJobError(
            f"TrainJob name {name!r}: at most {_room(nodes)} characters with {nodes} nodes: "
            f"JobSet's webhook refuses its longest pod name, {longest!r}, over 63 characters"
        )
    container = pool["container_spec"]
    env = {item["name"]: str(item["value"]) for item in container.get("env") or []}
    env.update(output_dirs(base_output_directory))
    env[NUM_NODES_ENV] = str(nodes)
    env[NODE_ADDRESS_ENV] = node_address(name)
    machine = pool.get("machine_spec") or {}
    amounts = {"cpu": pods.cpu, "memory": pods.memory}
    gpus = int(float(machine.get("accelerator_count") or 0))
    if gpus > 0 and machine.get("accelerator_type"):
        amounts[GPU_RESOURCE] = str(gpus)
    env.update(gpu_env(amounts))
    trainer = trainer_spec(
        container["image_uri"],
        container.get("command") or [],
        container.get("args") or [],
        env,
        amounts,
        nodes,
    )
    pod = pod_override(
        pods.service_account, pods.data_pvc, pods.data_mount_path, None, placement(pods.spot_label)
    )
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "hpt-pipeline", **(labels or {})},
        },
        "spec": trainjob_spec(trainer, override_field, pod, runtime, runtime_kind),
    }


def override_field(openapi_document: Mapping[str, Any] | str) -> str | None:
    """The override field the served TrainJob schema has (None: neither, not a TrainJob API).

    Args:
        openapi_document: The API server's `/openapi/v3/apis/trainer.kubeflow.org/v1alpha1`
            document (or its text); any authenticated account may read it.
    """
    text = openapi_document if isinstance(openapi_document, str) else json.dumps(openapi_document)
    for field in (PATCHES, V21_OVERRIDES):  # v2.2+ first: a later release might keep both
        if f'"{field}"' in text:
            return field
    return None
