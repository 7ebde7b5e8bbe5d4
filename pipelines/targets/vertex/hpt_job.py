"""The Vertex HPT job: the full `HyperparameterTuningJob` payload, sent with GCPC's own launcher.

GCPC's `HyperparameterTuningJobRunOp` cannot send a stopping spec, so the vertex target's
tune step builds GCPC's payload here, field for field, plus
`study_spec.median_automated_stopping_spec` when early stopping is on, and hands it to GCPC's
launcher, which creates, polls and (on SIGTERM) cancels the job as the op does. Two launcher
habits are undone: integral floats are written back as integers, and the stopping spec the
launcher strips as falsy is put back. The job carries the run's labels merged with Vertex's
system labels. Why each: docs/vertex.md, "GCPC's launcher, as it behaves".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.jobs.scheduling import DEFAULT_MAX_WAIT_HOURS, vertex_scheduling
from pipelines.payloads import payload_items
from pipelines.study.budgets import Budgets

JOB_TYPE = "HyperparameterTuningJob"
# Vertex's median rule on steps (epochs), not on elapsed time: Optuna's MedianPruner locally.
MEDIAN_STOPPING = {"median_automated_stopping_spec": {"use_elapsed_duration": False}}


def integral_floats_to_int(value: Any) -> Any:
    """`1.0` → `1` everywhere inside lists and dicts (JSON parameters arrive as doubles)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: integral_floats_to_int(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [integral_floats_to_int(v) for v in value]
    return value


def hpt_job_payload(
    *,
    display_name: str,
    study_spec_metrics: Sequence[Any],
    study_spec_parameters: Sequence[Any],
    study_spec_algorithm: str,
    study_spec_measurement_selection_type: str,
    max_trial_count: int,
    parallel_trial_count: int,
    max_failed_trial_count: int,
    worker_pool_specs: Sequence[Any],
    base_output_directory: str,
    service_account: str = "",
    network: str = "",
    encryption_spec_key_name: str = "",
    early_stopping: bool = False,
    max_study_hours: float = 0.0,
    max_trials_no_progress: int = 0,
    trial_scheduling: str = "standard",
    max_wait_hours: float = DEFAULT_MAX_WAIT_HOURS,
    labels: Mapping[str, Any] | None = None,
    tensorboard: str = "",
) -> dict[str, Any]:
    """The job GCPC's `HyperparameterTuningJobRunOp` sends, plus the stopping spec and labels.

    The arguments are that op's inputs by the same names, one flat list on purpose: the tune
    component hands its inputs through by name, and `test_local_run` gives this function and
    `local_study.run_study` the same tune task's inputs. Empty strings stay in (the launcher
    strips them, as for the GCPC op). `trial_scheduling` (`max_wait_hours` for flex_start)
    becomes `trial_job_spec.scheduling`: every trial's capacity.
    """
    study_spec: dict[str, Any] = {
        "metrics": payload_items(study_spec_metrics),
        "parameters": payload_items(study_spec_parameters),
        "algorithm": study_spec_algorithm,
        "measurement_selection_type": study_spec_measurement_selection_type,
    }
    if early_stopping:
        study_spec.update(json.loads(json.dumps(MEDIAN_STOPPING)))
    budgets = Budgets(float(max_study_hours or 0), int(max_trials_no_progress or 0))
    if stopping := budgets.stopping_config():
        study_spec["study_stopping_config"] = stopping
    payload = {
        "display_name": display_name,
        "study_spec": study_spec,
        "max_trial_count": max_trial_count,
        "parallel_trial_count": parallel_trial_count,
        "max_failed_trial_count": max_failed_trial_count,
        "trial_job_spec": {
            "worker_pool_specs": payload_items(worker_pool_specs),
            "service_account": service_account,
            "network": network,
            "tensorboard": tensorboard,  # Vertex sets AIP_TENSORBOARD_LOG_DIR in each trial
            "base_output_directory": {"output_uri_prefix": base_output_directory},
            "scheduling": vertex_scheduling(trial_scheduling, max_wait_hours),
        },
        "encryption_spec": {"kms_key_name": encryption_spec_key_name},
        "labels": {str(k): str(v) for k, v in (labels or {}).items()},
    }
    return integral_floats_to_int(payload)


def restore_stopping(payload: Mapping[str, Any], job_spec: dict[str, Any]) -> dict[str, Any]:
    """Put back the stopping spec (and budgets) the launcher's empty-field stripping removed."""
    stopping = {
        k: v
        for k, v in payload.get("study_spec", {}).items()
        if k.endswith("_spec") or k == "study_stopping_config"
    }
    for key, value in stopping.items():
        job_spec.setdefault("study_spec", {})[key] = value
    return job_spec


def create_job_with_stopping(payload: Mapping[str, Any]) -> Callable[..., Any]:
    """A `create_job_fn` for GCPC's `JobRemoteRunner` that keeps the stopping spec."""
    from google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job import (
        remote_runner,
    )

    def create(job_client: Any, parent: str, job_spec: dict[str, Any]) -> Any:
        return remote_runner.create_hyperparameter_tuning_job_with_client(
            job_client, parent, restore_stopping(payload, job_spec)
        )

    return create


def launcher_job_spec(payload: Mapping[str, Any]) -> dict[str, Any]:
    """`payload` with the run's labels merged over the system labels of this step's environment.

    GCPC's `gcp_labels_util.attach_system_labels`: the labels Vertex passes in
    `VERTEX_AI_PIPELINES_RUN_LABELS` are kept; on a clash the run's label wins.
    """
    from google_cloud_pipeline_components.container.v1.gcp_launcher.utils import gcp_labels_util

    job_spec = dict(payload)
    job_spec["labels"] = gcp_labels_util.attach_system_labels(dict(payload.get("labels") or {}))
    return job_spec


def launcher_request(payload: Mapping[str, Any]) -> Any:
    """The request object GCPC's launcher builds from `payload`, offline.

    The same steps: labels merged (`launcher_job_spec`), empty fields stripped
    (`json_util.recursive_remove_empty`), the stopping spec restored, then the
    `aiplatform_v1.HyperparameterTuningJob` the client is called with (its
    constructor refuses unknown fields and floats in integer or enum fields).
    """
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob
    from google_cloud_pipeline_components.container.v1.gcp_launcher.utils import json_util

    job_spec = json_util.recursive_remove_empty(json.loads(json.dumps(launcher_job_spec(payload))))
    return HyperparameterTuningJob(restore_stopping(payload, job_spec))


def run_hpt_job(
    payload: Mapping[str, Any], *, project: str, location: str, gcp_resources: str
) -> None:
    """Create (or resume polling) the job with GCPC's launcher code; blocks until it ends.

    As GCPC's op: an existing job in `gcp_resources` (a retried task) is polled, not
    recreated; a failed job raises; SIGTERM while polling (the run cancelled: the
    component's process is the one signalled, `components.base.exec_python`) sends
    the job's cancel request.
    """
    from google_cloud_pipeline_components.container.v1.gcp_launcher import job_remote_runner
    from google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job import (
        remote_runner,
    )

    job_spec = launcher_job_spec(payload)
    runner = job_remote_runner.JobRemoteRunner(JOB_TYPE, project, location, gcp_resources)
    job_name = runner.check_if_job_exists()
    if job_name is None:
        job_name = runner.create_job(create_job_with_stopping(job_spec), json.dumps(job_spec))
    runner.poll_job(remote_runner.get_hyperparameter_tuning_job_with_client, job_name)
