"""A Katib trial as a Kubeflow Trainer v2 `TrainJob`: several nodes per trial (Katib 0.19+).

Katib 0.19 runs TrainJob trials (kubeflow/katib v0.19.0: `TrainJob` in `KubeflowJobKinds`,
`pkg/apis/controller/experiments/v1beta1/constants.go`; the example
`examples/v1beta1/kubeflow-trainer/trainjob-pytorch.yaml`). Its defaults for one
(`experiment_defaults.go`, `setDefaultTrialTemplate`) are written out here, so
`katib_rules` checks them and no release's defaulting is relied on: success on `Complete`,
failure on `Failed`, and the primary pod `jobset.sigs.k8s.io/replicatedjob-name: node` +
`batch.kubernetes.io/job-completion-index: "0"`: node 0, the chief, the one pod the pod
webhook injects the File collector in (`pkg/webhook/v1beta1/pod/inject_webhook.go`,
`isPrimaryPod`) and the only one the trainer reports from. The primary container is
Trainer v2's `node`. Katib names the TrainJob after its Trial
(`pkg/controller.v1beta1/experiment/manifest/generator.go`, `runSpec.SetName(trialName)`),
so each node's address is `${trialParameters.trialName}-node-0-{index}.<the same>:2222`,
from which the trainer forms `TF_CONFIG` (`trainer.cluster`). The katib-controller must be
allowed to create TrainJobs: `TrainJob.v1alpha1.trainer.kubeflow.org` in katib-config's
`init.controller.trialResources` and `trainjobs` in its ClusterRole (Katib 0.19's installs
have both; `manifests` writes the ClusterRole and the config line, `rbac.katib_controller`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.study.search_space import SearchSpace
from pipelines.targets.kubeflow import spot, trainjob
from pipelines.targets.kubeflow.trial_template import (
    TRIAL_NAME_PARAMETER,
    TrialPods,
    placeholder,
    trial_container,
)
from trainer.cluster import NODE_ADDRESS_ENV, NUM_NODES_ENV

# experiments/v1beta1/constants.go (v0.19.0): DefaultTrainJob{Success,Failure}Condition.
SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
PRIMARY_POD_LABELS = {  # DefaultTrainJobPrimaryPodLabels: node 0 of the replicated job `node`
    "jobset.sigs.k8s.io/replicatedjob-name": trainjob.NODE,
    "batch.kubernetes.io/job-completion-index": "0",
}
PRIMARY_CONTAINER = trainjob.NODE  # the container Trainer v2 fills from `trainer`
# katib-config `init.controller.trialResources` entry (Kind.version.group).
TRIAL_RESOURCE = f"{trainjob.KIND}.{trainjob.VERSION}.{trainjob.GROUP}"


def trial_trainjob(
    pods: TrialPods,
    space: SearchSpace,
    *,
    override_field: str,
    pod_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The trial's TrainJob: `pods.nodes` nodes of the trial pool's container, for Katib to name.

    Args:
        pods: The trial pool and cluster settings (`pods.nodes` > 1).
        space: The search space (its parameters become `${trialParameters.<id>}` flags).
        override_field: `podTemplateOverrides` (Trainer v2.1) or `runtimePatches` (v2.2+).
        pod_labels: On every node's pod (the tune step finds them by its experiment label).

    Raises:
        KatibSpecError: The pool makes no trial (`trial_template.trial_container`).
        TFJobError: An unknown override field.
    """
    made = trial_container(pods, space)
    env = dict(made.env)
    env[NUM_NODES_ENV] = str(pods.nodes)
    env[NODE_ADDRESS_ENV] = trainjob.node_address(placeholder(TRIAL_NAME_PARAMETER))
    trainer = trainjob.trainer_spec(
        made.image, made.command, made.args, env, made.resources["limits"], pods.nodes
    )
    pod = trainjob.pod_override(
        pods.service_account or None,
        pods.pvc_name or None,
        pods.data_mount_path,
        pod_labels,
        spot.placement(pods.spot_label),
    )
    return {
        "apiVersion": trainjob.API_VERSION,
        "kind": trainjob.KIND,
        "spec": trainjob.trainjob_spec(trainer, override_field, pod),
    }
