"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/features_job.py.

The features step's `CustomJob` as Vertex parses it (strictly, unknown fields refused) and
what GCPC's launcher is handed to send it.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from pipelines.jobs import worker_pools
from pipelines.payloads import refuse_camel_case, strict_parse
from pipelines.targets.vertex import features_job

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.cloud.aiplatform_v1.types"),
    importlib.import_module(
        "google_cloud_pipeline_components.container.v1.custom_job.remote_runner"
    ),
]


KMS = "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"
NETWORK = "projects/123/global/networks/vpc"
SA = "features@p.iam.gserviceaccount.com"


def pools() -> list[dict[str, Any]]:
    return worker_pools.trial_worker_pool_specs(
        image_uri="europe-docker.pkg.dev/p/r/trainer:v1",
        command=["python", "-m", "trainer.features"],
        args=["--data=gs://b/data"],
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
    )


def payload(**settings: Any) -> dict[str, Any]:
    return features_job.custom_job_payload(
        display_name="hpt-features",
        worker_pool_specs=pools(),
        base_output_directory="gs://b/root/features",
        **settings,
    )


def test_the_run_as_account_network_key_and_labels_reach_the_custom_job():
    sent = payload(
        service_account=SA, network=NETWORK, encryption_spec_key_name=KMS, labels={"run": 7}
    )
    refuse_camel_case(sent, "features job")
    job = strict_parse("CustomJob", sent, "features job")
    assert job.display_name == "hpt-features"
    assert job.job_spec.service_account == SA
    assert job.job_spec.network == NETWORK
    assert job.encryption_spec.kms_key_name == KMS
    assert dict(job.labels) == {"run": "7"}
    assert job.job_spec.base_output_directory.output_uri_prefix == "gs://b/root/features"
    pool = job.job_spec.worker_pool_specs[0]
    assert pool.machine_spec.machine_type == "n1-standard-8"
    assert list(pool.container_spec.command) == ["python", "-m", "trainer.features"]


def test_settings_left_empty_are_left_out_not_sent_empty():
    sent = payload()
    strict_parse("CustomJob", sent, "features job")
    assert set(sent) == {"display_name", "job_spec", "labels"}
    assert set(sent["job_spec"]) == {"worker_pool_specs", "base_output_directory"}
    assert sent["labels"] == {}


def test_gcpcs_launcher_is_handed_the_custom_job_to_create_or_resume(monkeypatch):
    from google_cloud_pipeline_components.container.v1.custom_job import remote_runner

    handed: list[dict[str, Any]] = []
    monkeypatch.setattr(remote_runner, "create_custom_job", lambda **kw: handed.append(kw))
    sent = payload(network=NETWORK)
    features_job.run_custom_job(
        sent, project="p", location="europe-west4", gcp_resources="/out/gcp_resources"
    )
    (call,) = handed
    assert json.loads(call.pop("payload")) == sent
    assert call == {
        "type": "CustomJob",
        "project": "p",
        "location": "europe-west4",
        "gcp_resources": "/out/gcp_resources",
    }
