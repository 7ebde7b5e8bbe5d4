"""The final job as a TFJob: typed models round trip, the operator's TF_CONFIG read by the
trainer, the webhook's rules, the RBAC, and the component's waiting with the API replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs.replica_env import cluster_env, output_dirs
from pipelines.jobs.worker_pools import training_worker_pool_specs
from pipelines.targets.kubeflow import final_job, kube, rbac, tfjob, trainjob
from pipelines.targets.kubeflow.kube import ReplicaPods
from pipelines.targets.kubeflow.waiting import KubeflowJobError
from tests import tfjob_operator
from tests.fake_kube import Cluster, HeldCustomObjects, call_with_request
from tests.support import tfjob_from_manifest, tfjob_replica_counts, with_pods
from trainer import cluster

IMAGE = "registry.example.com/hpt/trainer:v1"
COMMAND = ["python", "-m", "trainer.task"]
ARGS = ["--data_dir=/mnt/hpt/data", "--epochs=3", "--learning_rate=0.003"]
BASE = "/mnt/hpt/runs/run-1/final-job"
NAMESPACE = "team-a"


def pools(workers: int = 2, gpus: int = 1, env: dict[str, str] | None = None) -> list[dict]:
    return training_worker_pool_specs(
        image_uri=IMAGE,
        command=COMMAND,
        args=ARGS,
        env=env,
        accelerator_type="NVIDIA_TESLA_T4" if gpus else None,
        accelerator_count=gpus,
        worker_count=workers,
    )


def build(workers: int = 2, gpus: int = 1, **changes: Any) -> Any:
    options: dict[str, Any] = dict(
        cpu="4",
        memory="16Gi",
        service_account="hpt-runner",
        data_pvc="hpt-data",
        data_mount_path="/mnt/hpt",
    )
    options.update(changes)
    pods, rest = with_pods(options)
    return tfjob.build_tfjob(
        "hpt-final-0123456789", NAMESPACE, pools(workers, gpus), BASE, pods, **rest
    )


# --------------------------------------------------------------------------- the TFJob


def test_the_tfjob_round_trips_through_the_typed_models_and_the_api_serializer() -> None:
    from kubeflow.training import models

    job = build()
    manifest = tfjob.to_manifest(job)
    back = tfjob_from_manifest(json.loads(json.dumps(manifest)))  # as the API returns it
    assert isinstance(back, models.KubeflowOrgV1TFJob)
    assert back == job
    assert tfjob.to_manifest(back) == manifest


def test_the_manifest_field_by_field() -> None:
    manifest = tfjob.to_manifest(build(workers=2, gpus=1))
    assert manifest["apiVersion"] == "kubeflow.org/v1"
    assert manifest["kind"] == "TFJob"
    assert manifest["metadata"] == {
        "name": "hpt-final-0123456789",
        "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/part-of": "hpt-pipeline"},
    }
    spec = manifest["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0}
    assert set(spec["tfReplicaSpecs"]) == {"Chief", "Worker"}
    assert tfjob_replica_counts(manifest) == {"Chief": 1, "Worker": 2}
    for rtype in ("Chief", "Worker"):
        replica = spec["tfReplicaSpecs"][rtype]
        assert replica["restartPolicy"] == "Never"
        # Out of Istio injection: a sidecar would keep the pod Running after TensorFlow exits.
        assert replica["template"]["metadata"] == {
            "annotations": {"sidecar.istio.io/inject": "false"}
        }
        pod = replica["template"]["spec"]
        assert pod["serviceAccountName"] == "hpt-runner"
        assert pod["volumes"] == [
            {"name": "hpt-data", "persistentVolumeClaim": {"claimName": "hpt-data"}}
        ]
        (container,) = pod["containers"]
        assert container["name"] == "tensorflow"  # the operator sets TF_CONFIG only there
        assert container["image"] == IMAGE
        assert container["command"] == COMMAND
        assert container["args"] == ARGS
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        amounts = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
        assert container["resources"] == {"requests": amounts, "limits": amounts}
        assert container["volumeMounts"] == [{"name": "hpt-data", "mountPath": "/mnt/hpt"}]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == output_dirs(BASE)
        assert env["AIP_MODEL_DIR"] == f"{BASE}/model/"  # where model_artifact.describe looks


def test_a_chief_alone_without_gpus_pvc_or_account_has_no_such_fields() -> None:
    manifest = tfjob.to_manifest(
        build(workers=0, gpus=0, service_account=None, data_pvc=None, active_deadline_seconds=60)
    )
    assert tfjob_replica_counts(manifest) == {"Chief": 1}
    assert manifest["spec"]["runPolicy"]["activeDeadlineSeconds"] == 60
    pod = manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
    assert set(pod) == {"containers", "securityContext"}
    assert pod["securityContext"]["runAsUser"] == 1000  # the components' uid, not root
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}
    assert "volumeMounts" not in container


def test_the_pools_environment_is_kept_and_the_output_dirs_win() -> None:
    job = tfjob.build_tfjob(
        "hpt-final-x",
        NAMESPACE,
        pools(env={"HPT_EXTRA": "1", "AIP_MODEL_DIR": "gs://elsewhere/"}),
        BASE,
        ReplicaPods(cpu="1", memory="1Gi"),
    )
    container = tfjob.to_manifest(job)["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"HPT_EXTRA": "1", **output_dirs(BASE)}


def test_json_string_pools_as_kfp_passes_them_are_accepted() -> None:
    job = tfjob.build_tfjob(
        "hpt-final-x", NAMESPACE, [json.dumps(p) for p in pools()], BASE, ReplicaPods("1", "1Gi")
    )
    assert tfjob_replica_counts(tfjob.to_manifest(job)) == {"Chief": 1, "Worker": 2}


def test_the_typed_models_refuse_what_kubernetes_would() -> None:
    manifest = tfjob.to_manifest(build())
    del manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        tfjob_from_manifest(manifest)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([], "empty"),
        ([{"replica_count": 1, "container_spec": {}}], r"worker_pool_specs\[0\].*image_uri"),
        (
            [{"replica_count": 2, "container_spec": {"image_uri": IMAGE}}],
            "pool 0 is the chief",
        ),
        ([{"replica_count": 1, "container_spec": {"image_uri": IMAGE}}] * 3, "3 pools"),
    ],
)
def test_pools_that_make_no_tfjob_are_one_line_errors(specs: list, message: str) -> None:
    with pytest.raises(tfjob.TFJobError, match=message) as err:
        tfjob.build_tfjob("hpt-final-x", NAMESPACE, specs, BASE, ReplicaPods("1", "1Gi"))
    assert "\n" not in str(err.value)


def test_the_webhook_rules() -> None:
    good = tfjob.to_manifest(build())
    tfjob.validate_tfjob(good)
    cases: list[tuple[Any, str]] = [
        (lambda m: m["metadata"].update(name="Final_Job"), "DNS-1035"),
        (lambda m: m["metadata"].update(name="a" * 64), "DNS-1035"),
        (lambda m: m["spec"].update(tfReplicaSpecs={}), "must be set"),
        (
            lambda m: m["spec"]["tfReplicaSpecs"].update(
                Master=m["spec"]["tfReplicaSpecs"]["Chief"]
            ),
            "at most one Chief",
        ),
        (
            lambda m: m["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][
                0
            ].update(name="main"),
            "container named 'tensorflow'",
        ),
        (
            lambda m: m["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][
                0
            ].update(image=""),
            "no image",
        ),
    ]
    for change, message in cases:
        manifest = json.loads(json.dumps(good))
        change(manifest)
        with pytest.raises(tfjob.TFJobError, match=message):
            tfjob.validate_tfjob(manifest)


def test_job_names_are_stable_dns_labels_with_room_for_service_names() -> None:
    a = trainjob.trainjob_name("HPT Pipeline: nightly!", "gs://b/run-1/final")
    assert a == trainjob.trainjob_name("HPT Pipeline: nightly!", "gs://b/run-1/final")
    assert a != trainjob.trainjob_name("HPT Pipeline: nightly!", "gs://b/run-2/final")
    assert a.startswith("hpt-pipeline-nightly-final-")
    long = trainjob.trainjob_name("9" + "x" * 200, "/mnt/hpt/r")
    for name in (a, long, trainjob.trainjob_name("123", "r")):
        manifest = tfjob.to_manifest(build())
        manifest["metadata"]["name"] = name
        tfjob.validate_tfjob(manifest)
        assert len(f"{name}-worker-99") <= 63  # the replicas' service names are labels too


# --------------------------------------------------------------------------- TF_CONFIG


def test_the_operators_tf_config_for_chief_and_workers() -> None:
    replicas = {"Chief": 1, "Worker": 2}
    config = tfjob_operator.operator_tf_config(
        "final", "team-a", replicas, "Worker", 1, cluster_domain=""
    )
    assert config == {
        "cluster": {
            "chief": ["final-chief-0.team-a.svc:2222"],
            "worker": ["final-worker-0.team-a.svc:2222", "final-worker-1.team-a.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    with_domain = tfjob_operator.operator_tf_config(
        "final", "team-a", replicas, "Chief", 0, cluster_domain="cluster.local"
    )
    assert with_domain is not None
    assert with_domain["cluster"]["chief"] == ["final-chief-0.team-a.svc.cluster.local:2222"]


def test_the_trainer_reads_the_operators_tf_config_chief_is_chief_workers_are_not() -> None:
    manifest = tfjob.to_manifest(build(workers=2))
    name, replicas = manifest["metadata"]["name"], tfjob_replica_counts(manifest)
    seen = []
    for rtype, count in replicas.items():
        for index in range(count):
            config = tfjob_operator.operator_tf_config(name, NAMESPACE, replicas, rtype, index)
            info = cluster.resolve({"TF_CONFIG": json.dumps(config)})
            seen.append((info.task_type, info.task_id, info.is_chief, info.num_training_tasks))
    assert seen == [("chief", 0, True, 3), ("worker", 0, False, 3), ("worker", 1, False, 3)]


def test_the_operators_tf_config_has_the_shape_the_local_executor_gives() -> None:
    """Vertex's CLUSTER_SPEC, as the local job executor translates it, and the operator's
    TF_CONFIG differ only in addresses: the trainer sees the same cluster either way."""
    operator = tfjob_operator.operator_tf_config("j", "ns", {"Chief": 1, "Worker": 2}, "Worker", 1)
    local = json.loads(
        cluster_env({"workerpool0": ["h:1"], "workerpool1": ["h:2", "h:3"]}, 1, 1)["TF_CONFIG"]
    )
    assert operator is not None
    assert operator.keys() == local.keys()
    assert operator["task"] == local["task"]
    assert {k: len(v) for k, v in operator["cluster"].items()} == {
        k: len(v) for k, v in local["cluster"].items()
    }


def test_a_one_replica_job_gets_no_tf_config_and_trains_alone_as_chief() -> None:
    assert tfjob_operator.operator_tf_config("j", "ns", {"Chief": 1}, "Chief", 0) is None
    info = cluster.resolve({})
    assert info.is_chief and info.num_training_tasks == 0


# --------------------------------------------------------------------------- RBAC


def test_the_rbac_grants_what_the_components_do_and_nothing_else() -> None:
    role, binding, nodes, nodes_binding = rbac.manifests("team-a", "default-editor")
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "team-a"
    granted = {
        (group, resource): sorted(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    full = sorted(["create", "get", "list", "watch", "delete"])
    assert granted == {
        ("kubeflow.org", "experiments"): sorted([*full, "patch"]),  # a rerun raises the counts
        ("kubeflow.org", "trials"): full,
        ("kubeflow.org", "tfjobs"): full,
        ("trainer.kubeflow.org", "trainjobs"): full,  # kubeflow_job_api: trainjob
        ("trainer.kubeflow.org", "trainingruntimes"): ["get", "list"],  # a namespaced runtime
        ("", "pods"): ["get", "list", "watch"],
        ("", "pods/log"): ["get", "list", "watch"],
        ("", "namespaces"): ["get"],  # the profile labels check
        ("", "persistentvolumeclaims"): ["get"],  # the ReadWriteMany check
    }
    assert nodes["kind"] == "ClusterRole" and nodes["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},  # the GPU check
        {  # the train step's runtime check
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["clustertrainingruntimes"],
            "verbs": ["get", "list"],
        },
    ]
    assert nodes_binding["subjects"] == binding["subjects"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "default-editor", "namespace": "team-a"}
    ]
    _, standalone, *_ = rbac.manifests("kubeflow")
    assert standalone["subjects"][0]["name"] == "pipeline-runner"  # standalone KFP
    _, profile, *_ = rbac.manifests("team-a")  # multi-user KFP runs as default-editor there
    assert profile["subjects"] == [
        {"kind": "ServiceAccount", "name": "default-editor", "namespace": "team-a"}
    ]


def test_the_rbac_parses_as_kubernetes_rbac_objects() -> None:
    from kubernetes import client as k8s

    class Response:
        def __init__(self, obj: dict) -> None:
            self.data = json.dumps(obj)

    api = k8s.ApiClient()
    for doc in rbac.manifests("team-a"):
        parsed = api.deserialize(Response(doc), f"V1{doc['kind']}")
        assert api.sanitize_for_serialization(parsed) == doc, doc["kind"]


# --------------------------------------------------------------------------- waiting


def condition(kind: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    from kubeflow.training import models

    typed = models.KubeflowOrgV1JobCondition(
        type=kind, status=status, reason=reason, message=message
    )
    return tfjob.to_manifest(typed)


CREATED = condition("Created", "TFJobCreated", "TFJob team-a/x is created.")
RUNNING = condition("Running", "TFJobRunning", "TFJob team-a/x is running.")
SUCCEEDED = condition("Succeeded", "TFJobSucceeded", "TFJob team-a/x successfully completed.")
FAILED = condition(
    "Failed", "TFJobFailed", "TFJob team-a/x has failed because 1 Worker replica(s) failed."
)


class FakeApi(HeldCustomObjects):
    """`CustomObjectsApi`'s create/get, replaying the statuses the operator would write.

    Calls are held to the real methods' signatures and keywords (`fake_kube.held_to`).
    """

    def __init__(self, statuses: list[dict[str, Any]], exists: bool = False, refuse: int = 0):
        self.statuses = statuses
        self.exists = exists
        self.refuse = refuse
        self.created: list[tuple] = []
        self.gets = 0
        self.body: dict[str, Any] = {}

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        from kubernetes.client import ApiException

        self.created.append((group, version, namespace, plural))
        self.body = body
        if self.refuse:
            err = ApiException(status=self.refuse, reason="Forbidden")
            err.body = json.dumps({"message": 'tfjobs.kubeflow.org is forbidden: User "x"'})
            raise err
        if self.exists:
            raise ApiException(status=409, reason="Conflict")
        return {**body, "status": {}}

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        assert (group, version, namespace, plural) == ("kubeflow.org", "v1", NAMESPACE, "tfjobs")
        status = self.statuses[min(self.gets, len(self.statuses) - 1)]
        self.gets += 1
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(api: FakeApi, lines: list[str], timeout_s: float = 3600, **changes: Any) -> dict:
    clock = Clock()
    options: dict[str, Any] = dict(
        worker_pool_specs=pools(),
        base_output_directory=BASE,
        display_name="hpt-pipeline",
        namespace=NAMESPACE,
        cpu="2",
        memory="8Gi",
        timeout_s=timeout_s,
        poll_s=10,
        api=api,
        core_api=Cluster(namespace=NAMESPACE, gpus=[1]).core,  # a profile namespace, a GPU node
        data_pvc="hpt-data",  # BASE is on it
        clock=clock,
        sleep=clock.sleep,
        echo=lines.append,
    )
    options.update(changes)
    return call_with_request(final_job.run_final_job, final_job.FinalJobRequest, options)


def replicas(**counts: dict[str, int]) -> dict[str, Any]:
    return {rtype: dict(c) for rtype, c in counts.items()}


def test_a_succeeded_job_is_returned_with_progress_lines() -> None:
    statuses = [
        {},
        {"conditions": [CREATED], "replicaStatuses": replicas(Chief={}, Worker={})},
        {
            "conditions": [CREATED, RUNNING],
            "replicaStatuses": replicas(Chief={"active": 1}, Worker={"active": 2}),
        },
        {
            "conditions": [CREATED, {**RUNNING, "status": "False"}, SUCCEEDED],
            "replicaStatuses": replicas(Chief={"succeeded": 1}, Worker={"succeeded": 2}),
        },
    ]
    api, lines = FakeApi(statuses), []
    job = run(api, lines)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert api.created == [("kubeflow.org", "v1", NAMESPACE, "tfjobs")]
    assert tfjob_replica_counts(api.body) == {"Chief": 1, "Worker": 2}
    assert api.body["spec"]["runPolicy"]["activeDeadlineSeconds"] == 3600
    name = trainjob.trainjob_name("hpt-pipeline", BASE)
    assert lines[:3] == [  # the cluster checks, before the job is created
        f"namespace {NAMESPACE}: Kubeflow profile, Katib metrics collector on; Istio injection "
        "on (istio-injection=enabled); trial and TFJob pods opt out",
        "cluster: tfjobs.kubeflow.org/v1 served",
        "data_pvc=hpt-data: ReadWriteMany",
    ]
    assert lines[3:] == [
        f"TFJob {NAMESPACE}/{name}: created",
        f"TFJob {name}: Pending (no replicas yet)",
        f"TFJob {name}: Created (Chief pending; Worker pending)",
        f"TFJob {name}: Running (Chief 1 active; Worker 2 active)",
        f"TFJob {name}: Succeeded (Chief 1 succeeded; Worker 2 succeeded)",
    ]


def test_a_failed_job_is_one_line_with_the_operators_message() -> None:
    statuses = [{"conditions": [CREATED, RUNNING]}, {"conditions": [CREATED, RUNNING, FAILED]}]
    with pytest.raises(KubeflowJobError) as err:
        run(FakeApi(statuses), [])
    text = str(err.value)
    assert "\n" not in text
    assert "failed" in text and "TFJobFailed" in text
    assert "has failed because 1 Worker replica(s) failed." in text


def test_a_job_that_does_not_finish_in_time_is_a_timeout() -> None:
    with pytest.raises(KubeflowJobError, match=r"did not finish within 30s.*Running") as err:
        run(FakeApi([{"conditions": [CREATED, RUNNING]}]), [], timeout_s=30)
    assert "\n" not in str(err.value)


def test_an_existing_job_with_the_same_name_is_reused() -> None:
    api, lines = FakeApi([{"conditions": [SUCCEEDED]}], exists=True), []
    run(api, lines)
    assert lines[3].endswith("exists, waiting on it")
    failed = FakeApi([{"conditions": [FAILED]}], exists=True)
    with pytest.raises(KubeflowJobError, match="existed before this task.*kubectl delete tfjob"):
        run(failed, [])


def test_a_refused_create_is_one_line_with_the_apis_message() -> None:
    with pytest.raises(KubeflowJobError, match=r"not created \(403 Forbidden: tfjobs.*forbidden"):
        run(FakeApi([{}], refuse=403), [])


def test_the_component_describes_the_chiefs_export(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kfp import dsl

    from pipelines.targets.kubeflow.steps.train_final import train_with_tfjob

    base = str(tmp_path / "final")
    card = {
        "versions": {"tensorflow": "2.21.0"},
        "hyperparameters": {"learning_rate": 0.003},
        "final_metrics": {"val_accuracy": 0.9, "epoch": 3},
        "dataset": {"metadata_sha256": "abc", "path": "/mnt/hpt/data", "class_names": ["a", "b"]},
        "training": {"replicas": 3, "strategy": "MultiWorkerMirroredStrategy"},
    }
    (tmp_path / "final" / "model").mkdir(parents=True)
    (tmp_path / "final" / "model" / "model.json").write_text(json.dumps(card))
    api = FakeApi([{"conditions": [CREATED, SUCCEEDED]}])
    monkeypatch.setattr(kube, "custom_objects_api", lambda: api)
    monkeypatch.setattr(kube, "core_v1_api", lambda: Cluster(namespace=NAMESPACE, gpus=[1]).core)
    model = dsl.Model(name="model", uri="minio://bucket/model", metadata={})
    uri = train_with_tfjob.python_func(
        worker_pool_specs=pools(),
        base_output_directory=base,
        display_name="hpt-pipeline",
        namespace=NAMESPACE,
        service_account="",
        data_pvc="hpt-data",
        data_mount_path=str(tmp_path),  # the claim, here a folder; the export is on it
        cpu="2",
        memory="8Gi",
        timeout_s=60,
        model=model,
    )
    # A shared-volume path: the minio:// artifact keeps its URI and records where the model is.
    assert model.uri == "minio://bucket/model"
    assert uri == model.metadata["location"] == f"{base}/model"
    assert model.metadata["replicas"] == 3
    assert (
        model.metadata["training_job"]
        == f"{NAMESPACE}/{trainjob.trainjob_name('hpt-pipeline', base)}"
    )
    pod = api.body["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
    assert "serviceAccountName" not in pod  # "" means the namespace's default
    assert pod["volumes"] == [
        {"name": "hpt-data", "persistentVolumeClaim": {"claimName": "hpt-data"}}
    ]
