"""Start-up hook for a component process under test: its cloud API replaced, calls recorded.

`tests/test_cancellation.py` puts this folder first on the `PYTHONPATH` of the
component's exact container command. `HPT_FAKE_API` picks the API (`vertex`: GCPC's
`JobServiceClient`, credentials and the cancel POST; `kubeflow`: the Kubernetes
`CustomObjectsApi` and `CoreV1Api`, answering as a Kubeflow profile namespace, and its
configuration); nothing else changes. Each call is
appended to `$HPT_FAKE_RECORD/<call>.jsonl`; the first status read (the job exists
and is being waited on) writes the process id to `$HPT_FAKE_RECORD/waiting`.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Any

RECORD = os.environ.get("HPT_FAKE_RECORD", "")


def record(call: str, value: Any) -> None:
    with open(os.path.join(RECORD, f"{call}.jsonl"), "a") as f:
        f.write(json.dumps(value) + "\n")


def waiting() -> None:
    path = os.path.join(RECORD, "waiting")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)


def fake_vertex() -> None:
    import google.auth
    import requests
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob, JobState

    class JobServiceClient:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def create_hyperparameter_tuning_job(self, parent: str, hyperparameter_tuning_job: Any):
            job = HyperparameterTuningJob(hyperparameter_tuning_job)
            record("create", {"parent": parent, "job": HyperparameterTuningJob.to_dict(job)})
            return SimpleNamespace(name=f"{parent}/hyperparameterTuningJobs/42")

        def get_hyperparameter_tuning_job(self, name: str, **_: Any) -> Any:
            waiting()
            return SimpleNamespace(name=name, state=JobState.JOB_STATE_RUNNING)

    def post(url: str, data: Any = None, headers: Any = None, **_: Any) -> Any:
        record("post", {"url": url, "authorization": (headers or {}).get("Authorization")})
        return SimpleNamespace(status_code=200)

    aiplatform.gapic.JobServiceClient = JobServiceClient
    google.auth.default = lambda **_: (SimpleNamespace(valid=True, token="fake"), "p")
    requests.post = post


def fake_kubeflow() -> None:
    from kubernetes import client, config

    class CustomObjectsApi:
        def create_namespaced_custom_object(
            self, group, version, namespace, plural, body, dry_run=None
        ):
            if dry_run != "All":  # the cluster check's dry run stores nothing
                record("create", {"where": [group, version, namespace, plural], "body": body})
            return body

        def get_api_resources(self, group, version):  # the Training Operator v1 is installed
            tfjobs = client.V1APIResource(
                name="tfjobs", singular_name="tfjob", namespaced=True, kind="TFJob", verbs=["get"]
            )
            return client.V1APIResourceList(group_version=f"{group}/{version}", resources=[tfjobs])

        def get_namespaced_custom_object(self, group, version, namespace, plural, name):
            waiting()
            running = {"type": "Running", "status": "True", "reason": "Running"}
            return {
                "kind": plural,
                "metadata": {"name": name, "namespace": namespace},
                "spec": {},
                "status": {"conditions": [{"type": "Created", "status": "True"}, running]},
            }

        def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kw):
            record("delete", {"where": [group, version, namespace, plural, name], **kw})

    class CoreV1Api:  # a Kubeflow profile namespace with a ReadWriteMany data claim
        def read_namespace(self, name):
            labels = {
                "app.kubernetes.io/part-of": "kubeflow-profile",
                "katib.kubeflow.org/metrics-collector-injection": "enabled",
            }
            return client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))

        def read_namespaced_persistent_volume_claim(self, name, namespace):
            modes = ["ReadWriteMany"]
            return client.V1PersistentVolumeClaim(
                spec=client.V1PersistentVolumeClaimSpec(access_modes=modes),
                status=client.V1PersistentVolumeClaimStatus(access_modes=modes),
            )

        def list_node(self):
            gpus = client.V1NodeStatus(allocatable={"nvidia.com/gpu": "8"})
            return client.V1NodeList(items=[client.V1Node(status=gpus)])

        def list_namespaced_pod(self, namespace, label_selector=""):  # pods still starting
            return client.V1PodList(items=[])

    config.load_incluster_config = lambda *a, **k: None
    client.CustomObjectsApi = CustomObjectsApi
    client.CoreV1Api = CoreV1Api


if os.environ.get("HPT_FAKE_API") == "vertex":
    fake_vertex()
elif os.environ.get("HPT_FAKE_API") == "kubeflow":
    fake_kubeflow()
