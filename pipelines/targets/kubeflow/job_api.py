"""Which Kubernetes API runs the final job: the Training Operator's TFJob or Trainer v2's TrainJob.

`kubeflow_job_api` (`pipelines.settings_cloud.KUBEFLOW_JOB_APIS`) names it; `auto` takes what the
cluster serves, read through API discovery before anything is created: the TFJob where the
Training Operator v1 is installed (it sets `TF_CONFIG` itself), else the TrainJob (Kubeflow
1.11+ installs only Trainer v2). Neither served is one line naming both remedies. Both
steps resolve it first (the tune step too, so a cluster that cannot run the final job is
refused before the study). Why: docs/kubeflow.md, "Kubeflow Trainer v2 (TrainJob)".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.settings_cloud import KUBEFLOW_JOB_APIS
from pipelines.targets.kubeflow.kube import api_error_line
from pipelines.targets.kubeflow.waiting import KubeflowJobError

TFJOB, TRAINJOB = "tfjob", "trainjob"
SERVED_AS = {
    TFJOB: ("kubeflow.org", "v1", "tfjobs"),
    TRAINJOB: ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
}
REMEDY = {
    TFJOB: "install the Training Operator v1 (kubeflow/training-operator v1.9)",
    TRAINJOB: "install Kubeflow Trainer v2.1+ (Kubeflow 1.11's default) and apply the "
    "runtime `hpt-pipeline manifests` writes (trainjob/trainingruntime.yaml)",
}


class JobApiError(KubeflowJobError):
    """The job API asked for is not served, or the setting is not one of the choices."""


def served(custom: Any, api: str) -> bool:
    """Whether the cluster serves `api` (`tfjob` or `trainjob`), by API discovery.

    Raises:
        JobApiError: Discovery fails other than with 404 (the group version is absent).
    """
    from kubernetes.client import ApiException

    group, version, plural = SERVED_AS[api]
    try:
        found = custom.get_api_resources(group, version)
    except ApiException as err:
        if err.status == 404:
            return False
        raise JobApiError(f"API discovery of {group}/{version}: {api_error_line(err)}") from None
    return plural in {r.name for r in (found.resources or [])}


def resolve(custom: Any, setting: str, echo: Callable[[str], None] = print) -> str:
    """`tfjob` or `trainjob`: the setting, checked to be served, or what `auto` finds.

    Args:
        custom: A `CustomObjectsApi`.
        setting: `kubeflow_job_api`: auto, tfjob or trainjob.
        echo: Where the line saying what is used goes.

    Raises:
        JobApiError: Not one of the choices, or not served (one line with the remedy).
    """
    if setting not in KUBEFLOW_JOB_APIS:
        raise JobApiError(
            f"kubeflow_job_api={setting!r}: expected one of {', '.join(KUBEFLOW_JOB_APIS)}"
        )
    wanted = [TFJOB, TRAINJOB] if setting == "auto" else [setting]
    for api in wanted:
        if served(custom, api):
            group, version, plural = SERVED_AS[api]
            chosen = f", used (kubeflow_job_api={setting})" if setting == "auto" else ""
            echo(f"cluster: {plural}.{group}/{version} served{chosen}")
            return api
    if setting == "auto":
        raise JobApiError(
            "kubeflow_job_api=auto: the cluster serves neither tfjobs.kubeflow.org/v1 nor "
            f"trainjobs.trainer.kubeflow.org/v1alpha1: {REMEDY[TRAINJOB]}, or {REMEDY[TFJOB]}"
        )
    if setting == TFJOB:
        raise JobApiError(
            "kubeflow_job_api=tfjob: the cluster serves no TFJob API (tfjobs.kubeflow.org/v1): "
            "Kubeflow 1.11+ installs Kubeflow Trainer v2, which has no TensorFlow runtime; "
            "install the Training Operator v1 beside it (README, On Kubeflow), or set "
            "kubeflow_job_api: trainjob (or auto)"
        )
    raise JobApiError(
        "kubeflow_job_api=trainjob: the cluster serves no TrainJob API "
        f"(trainjobs.trainer.kubeflow.org/v1alpha1): {REMEDY[TRAINJOB]}, or set "
        "kubeflow_job_api: tfjob (or auto)"
    )
