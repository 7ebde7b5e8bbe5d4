"""The RBAC the pipeline's service account needs in the namespace it works in.

The tune and train components run as the KFP run's service account and create,
watch and delete Katib Experiments (reading their Trials), TFJobs and TrainJobs, and read
the pods and logs of trials and replicas for progress and errors; their cluster
checks read the namespace, the data claim, the TrainJob runtimes and (optionally) the
nodes. `manifests` returns a `Role` and a `RoleBinding` (rbac.authorization.k8s.io/v1),
and a ClusterRole reading nodes and ClusterTrainingRuntimes with its binding, as dicts,
ready to be written as YAML and applied by a cluster admin. For TrainJob trials
(`trial_workers` > 0), `katib_trainjobs` is what Katib's side needs: its controller
allowed to run TrainJobs (Katib 0.19's own ClusterRole has it,
`manifests/v1beta1/components/controller/rbac.yaml`; an older or trimmed install may not)
and the step allowed to read `katib-config` (`trainjob_checks`).
"""

from __future__ import annotations

from typing import Any

RBAC_API = "rbac.authorization.k8s.io/v1"
JOB_VERBS = ["create", "get", "list", "watch", "delete"]
# A rerun resumes a finished Experiment by raising its trial counts (resumePolicy FromVolume).
EXPERIMENT_VERBS = [*JOB_VERBS, "patch"]
READ_VERBS = ["get", "list", "watch"]
RUNTIME_VERBS = ["get", "list"]  # the train step reads the runtime it names (`trainjob_checks`)
STANDALONE_ACCOUNT = "pipeline-runner"  # KFP's run account in `kubeflow` (standalone KFP)
PROFILE_ACCOUNT = "default-editor"  # multi-user KFP runs as it in each profile namespace


def default_service_account(namespace: str) -> str:
    """The account a KFP run's pods use when none is set.

    `pipeline-runner` in `kubeflow` (standalone KFP); `default-editor` in a profile
    namespace, which has no `pipeline-runner` (multi-user KFP runs there as `default-editor`).
    """
    return STANDALONE_ACCOUNT if namespace == "kubeflow" else PROFILE_ACCOUNT


def rules() -> list[dict[str, Any]]:
    """What the components do: Katib and TFJob objects in full, pods and logs read-only."""
    return [
        {"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": EXPERIMENT_VERBS},
        {"apiGroups": ["kubeflow.org"], "resources": ["trials"], "verbs": JOB_VERBS},
        {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": JOB_VERBS},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": JOB_VERBS},
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainingruntimes"],
            "verbs": RUNTIME_VERBS,
        },
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": READ_VERBS},
        # The steps' cluster checks: the namespace's own labels (a RoleBinding grants its own
        # namespace object) and the data claim's access modes.
        {
            "apiGroups": [""],
            "resources": ["namespaces", "persistentvolumeclaims"],
            "verbs": ["get"],
        },
    ]


def node_reader(name: str, namespace: str, account: str) -> list[dict[str, Any]]:
    """A ClusterRole reading nodes (the GPU check) and ClusterTrainingRuntimes, and its binding.

    Optional: without it the steps say they could not check the GPUs or the TrainJob
    runtime, and go on.
    """
    cluster_name = f"{name}-{namespace}-nodes"
    labels = {"app.kubernetes.io/part-of": "hpt-pipeline"}
    role = {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": cluster_name, "labels": labels},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "resources": ["clustertrainingruntimes"],
                "verbs": RUNTIME_VERBS,
            },
        ],
    }
    binding = {
        "apiVersion": RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": cluster_name, "labels": labels},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_name,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    return [role, binding]


def manifests(
    namespace: str,
    service_account: str | None = None,
    *,
    name: str = "hpt-pipeline",
    service_account_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """A Role in `namespace`, its RoleBinding to the service account, and `node_reader`.

    Args:
        namespace: Where Experiments, Trials and TFJobs are created.
        service_account: The account the pipeline's pods run as
            (default: `default_service_account(namespace)`).
        name: Name of the Role and the RoleBinding.
        service_account_namespace: The account's namespace (default: `namespace`).
    """
    labels = {"app.kubernetes.io/part-of": "hpt-pipeline"}
    account = service_account or default_service_account(namespace)
    role = {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "rules": rules(),
    }
    binding = {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": account,
                "namespace": service_account_namespace or namespace,
            }
        ],
    }
    return [role, binding, *node_reader(name, service_account_namespace or namespace, account)]


KATIB_NAMESPACE = "kubeflow"  # where Kubeflow installs Katib
KATIB_CONTROLLER = "katib-controller"  # its controller's service account there
KATIB_CONFIG = "katib-config"  # the ConfigMap naming its trial resources


def _binding(kind: str, name: str, role: str, account: str, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "hpt-pipeline"}}
    if kind == "RoleBinding":
        meta["namespace"] = KATIB_NAMESPACE
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind.removesuffix("Binding"),
            "name": role,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def katib_trainjobs(
    namespace: str, service_account: str | None = None, *, name: str = "hpt-pipeline"
) -> list[dict[str, Any]]:
    """What TrainJob trials need on Katib's side (`trial_workers` > 0).

    A ClusterRole letting `katib-controller` create and watch TrainJobs (and read their
    JobSets), bound to it; a Role in Katib's namespace letting the pipeline's account read
    `katib-config` (the tune step checks its `trialResources`), bound to it.
    """
    labels = {"app.kubernetes.io/part-of": "hpt-pipeline"}
    controller = f"{name}-katib-trainjobs"
    reader = f"{name}-{namespace}-katib-config"
    account = service_account or default_service_account(namespace)
    return [
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": controller, "labels": labels},
            "rules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                    "verbs": ["create", "get", "list", "watch", "delete"],
                },
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": READ_VERBS},
            ],
        },
        _binding("ClusterRoleBinding", controller, controller, KATIB_CONTROLLER, KATIB_NAMESPACE),
        {
            "apiVersion": RBAC_API,
            "kind": "Role",
            "metadata": {"name": reader, "namespace": KATIB_NAMESPACE, "labels": labels},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": [KATIB_CONFIG],
                    "verbs": ["get"],
                }
            ],
        },
        _binding("RoleBinding", reader, reader, account, namespace),
    ]
