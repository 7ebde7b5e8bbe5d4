"""Read a Vertex HPT job's trials (through `gcp_resources` or a resource name) as Trial JSON."""

from __future__ import annotations

import json
import re
from typing import Any

_JOB_NAME = re.compile(
    r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/hyperparameterTuningJobs/[^/]+$"
)


def job_name_from_gcp_resources(gcp_resources: str) -> str:
    """The HPT job resource name inside GCPC's `gcp_resources` JSON.

    GCPC writes `{"resources": [{"resourceType": "HyperparameterTuningJob",
    "resourceUri": "https://REGION-aiplatform.googleapis.com/v1/projects/…/hyperparameterTuningJobs/ID"}]}`.
    """
    try:
        resources = json.loads(gcp_resources)["resources"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"gcp_resources is not GCPC's resources JSON: {err}") from None
    for resource in resources:
        if resource.get("resourceType") == "HyperparameterTuningJob":
            uri = resource["resourceUri"]
            name = uri.split("/v1/", 1)[-1]
            if _JOB_NAME.search(name):
                return name
            raise ValueError(f"resourceUri={uri}: not a hyperparameterTuningJobs resource")
    raise ValueError("gcp_resources names no HyperparameterTuningJob")


def fetch_trials(job_name: str, credentials: Any = None) -> list[dict[str, Any]]:
    """Trials of a Vertex HPT job, each as `Trial.to_json` gives it (state 4 = SUCCEEDED).

    Args:
        job_name: `projects/P/locations/L/hyperparameterTuningJobs/ID`.
        credentials: google-auth credentials; None uses the environment's.
    """
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import Trial

    match = _JOB_NAME.search(job_name)
    if not match:
        raise ValueError(f"{job_name}: expected projects/P/locations/L/hyperparameterTuningJobs/ID")
    job: Any = aiplatform.HyperparameterTuningJob.get(
        job_name,
        project=match["project"],
        location=match["location"],
        credentials=credentials,
    )
    from pipelines.study.trials import with_measured_once

    # A cost measured once (at the last step) also belongs to a final measurement Vertex
    # selected at another step (BEST_MEASUREMENT), as in the local study.
    return [with_measured_once(json.loads(Trial.to_json(trial))) for trial in job.trials]


_PIPELINE_JOB = re.compile(
    r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/pipelineJobs/[^/]+$"
)
_GOALS = {1: "maximize", 2: "minimize"}  # StudySpec.MetricSpec.GoalType


def fetch_study(
    job_name: str, credentials: Any = None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Trials of a Vertex HPT job (as `fetch_trials`) and its (metric, goal) pairs."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import Trial

    match = _JOB_NAME.search(job_name)
    if not match:
        raise ValueError(f"{job_name}: expected projects/P/locations/L/hyperparameterTuningJobs/ID")
    job: Any = aiplatform.HyperparameterTuningJob.get(
        job_name,
        project=match["project"],
        location=match["location"],
        credentials=credentials,
    )
    from pipelines.study.trials import with_measured_once

    metrics = job.gca_resource.study_spec.metrics
    objectives = [(m.metric_id, _GOALS.get(int(m.goal), str(m.goal))) for m in metrics]
    trials = [with_measured_once(json.loads(Trial.to_json(trial))) for trial in job.trials]
    return trials, objectives


def hpt_job_of_pipeline(pipeline_job: str, credentials: Any = None) -> str:
    """The HPT job a Vertex pipeline run's tune step ran (its `gcp_resources` output).

    Raises:
        ValueError: Not a pipeline job name, or no task of the run ran an HPT job.
    """
    from google.cloud import aiplatform

    match = _PIPELINE_JOB.search(pipeline_job)
    if not match:
        raise ValueError(f"{pipeline_job}: expected projects/P/locations/L/pipelineJobs/ID")
    job: Any = aiplatform.PipelineJob.get(
        pipeline_job, project=match["project"], location=match["location"], credentials=credentials
    )
    for task in job.gca_resource.job_detail.task_details:
        resources = dict(task.execution.metadata or {}).get("output:gcp_resources")
        if resources and "HyperparameterTuningJob" in str(resources):
            return job_name_from_gcp_resources(str(resources))
    raise ValueError(f"{pipeline_job}: no task of this run ran a HyperparameterTuningJob")
