"""Which Kubernetes kinds a Kubeflow run creates: one choice for the Katib trials and the final job.

Two settings decide both: `kubeflow_job_api` (tfjob | trainjob | auto, resolved against the
cluster by `job_api.resolve`) and `trial_workers` (pods per trial, `trial_nodes`: it + 1).
A one-node trial is a `batch/v1` Job, whatever runs the final job (any Katib runs it). A
multi-node trial is a Kubeflow Trainer v2 `TrainJob` (Katib 0.19+ runs TrainJob trials:
`TrainJob` in `KubeflowJobKinds`, `pkg/apis/controller/experiments/v1beta1/constants.go` of
kubeflow/katib v0.19.0), so the final job is one too: `auto` becomes `trainjob`, and `tfjob`
with several nodes per trial is refused in one line naming the TrainJob path (TFJob trials
are not built). Both steps
and `manifests` ask this module, so the tune step refuses before the study what the train
step could not run after it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipelines.settings_cloud import KUBEFLOW_JOB_APIS

JOB, TFJOB, TRAINJOB = "Job", "TFJob", "TrainJob"
API_KINDS = {"tfjob": TFJOB, "trainjob": TRAINJOB}  # a resolved kubeflow_job_api → its kind


class JobKindError(ValueError):
    """Settings whose trial and final job kinds cannot go together; one line."""


@dataclasses.dataclass(frozen=True)
class Kinds:
    """The kind of each trial (`Job` or `TrainJob`) and of the final job (`TFJob` or `TrainJob`)."""

    trial: str
    final: str


def trial_nodes(settings: Any) -> int:
    """Pods per Katib trial: its chief and `trial_workers` (`Settings`)."""
    return 1 + int(settings.training.trial_workers)


def _nodes(trial_nodes: int) -> int:
    nodes = int(trial_nodes)
    if nodes < 1 or nodes != trial_nodes:
        raise JobKindError(
            f"trial_nodes={trial_nodes!r}: expected an integer >= 1 (trial_workers + 1)"
        )
    return nodes


def job_api_setting(setting: str, trial_nodes: int) -> str:
    """The `kubeflow_job_api` both steps resolve: `auto` is `trainjob` for multi-node trials.

    Raises:
        JobKindError: An unknown setting, fewer than one node, or `tfjob` with several
            nodes per trial (one line naming both settings and the remedy).
    """
    if setting not in KUBEFLOW_JOB_APIS:
        raise JobKindError(
            f"kubeflow_job_api={setting!r}: expected one of {', '.join(KUBEFLOW_JOB_APIS)}"
        )
    if _nodes(trial_nodes) == 1:
        return setting
    if setting == "tfjob":
        raise JobKindError(
            f"trial_workers={trial_nodes - 1} with kubeflow_job_api=tfjob: multi-worker trials "
            "run as Katib TrainJob trials (Katib 0.19+, Kubeflow Trainer v2); set "
            "kubeflow_job_api: trainjob (or auto), or trial_workers: 0"
        )
    return "trainjob"


def trial_kind(trial_nodes: int) -> str:
    """`Job` for one node per trial, `TrainJob` for more (whatever runs the final job).

    Raises:
        JobKindError: Fewer than one node, or not an integer.
    """
    return TRAINJOB if _nodes(trial_nodes) > 1 else JOB


def kinds(api: str, trial_nodes: int = 1) -> Kinds:
    """The trial and final kinds for a resolved API (`tfjob` or `trainjob`).

    Raises:
        JobKindError: `api` unresolved or unknown, or refused by `job_api_setting`.
    """
    if api not in API_KINDS:
        raise JobKindError(f"job API {api!r}: expected one of {', '.join(API_KINDS)} (resolved)")
    job_api_setting(api, trial_nodes)
    return Kinds(trial=trial_kind(trial_nodes), final=API_KINDS[api])
