"""The features step on Vertex: a `CustomJob` on the trial machine type, sent by GCPC's launcher.

The same launcher code GCPC's `CustomTrainingJobOp` runs: an existing job in
`gcp_resources` (a retried task) is polled, not recreated; a failed job fails the step;
system labels are merged into the run's labels. Empty fields are left out, as the op's
placeholders leave them out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.payloads import payload_items

JOB_TYPE = "CustomJob"


def custom_job_payload(
    *,
    display_name: str,
    worker_pool_specs: Sequence[Any],
    base_output_directory: str,
    service_account: str = "",
    network: str = "",
    encryption_spec_key_name: str = "",
    labels: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `CustomJob` that runs the features job's pools (empty fields left out)."""
    job_spec: dict[str, Any] = {
        "worker_pool_specs": payload_items(worker_pool_specs),
        "base_output_directory": {"output_uri_prefix": base_output_directory},
    }
    if service_account:
        job_spec["service_account"] = service_account
    if network:
        job_spec["network"] = network
    payload: dict[str, Any] = {
        "display_name": display_name,
        "job_spec": job_spec,
        "labels": {str(k): str(v) for k, v in (labels or {}).items()},
    }
    if encryption_spec_key_name:
        payload["encryption_spec"] = {"kms_key_name": encryption_spec_key_name}
    return payload


def run_custom_job(
    payload: Mapping[str, Any], *, project: str, location: str, gcp_resources: str
) -> None:
    """Create (or resume polling) the job with GCPC's launcher code; blocks until it ends."""
    from google_cloud_pipeline_components.container.v1.custom_job import remote_runner

    remote_runner.create_custom_job(
        type=JOB_TYPE,
        project=project,
        location=location,
        payload=json.dumps(payload),
        gcp_resources=gcp_resources,
    )
