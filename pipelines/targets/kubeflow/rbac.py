"""The RBAC the pipeline's service account needs in the namespace it works in.

The tune and train components run as the KFP run's service account and create,
watch and delete Katib Experiments (reading their Trials), TFJobs and TrainJobs, and read
the pods and logs of trials and replicas for progress and errors; their cluster
checks read the namespace, the data claim and (optionally) the nodes. `manifests`
returns a `Role` and a `RoleBinding` (rbac.authorization.k8s.io/v1), and a
ClusterRole reading nodes with its binding, as dicts, ready to be written as YAML
and applied by a cluster admin.
"""

from __future__ import annotations

from typing import Any

RBAC_API = "rbac.authorization.k8s.io/v1"
JOB_VERBS = ["create", "get", "list", "watch", "delete"]
# A rerun resumes a finished Experiment by raising its trial counts (resumePolicy FromVolume).
EXPERIMENT_VERBS = [*JOB_VERBS, "patch"]
READ_VERBS = ["get", "list", "watch"]
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
    """A ClusterRole reading nodes (the GPU check) and its binding; optional.

    Without it the steps say they could not check the GPUs and go on.
    """
    cluster_name = f"{name}-{namespace}-nodes"
    labels = {"app.kubernetes.io/part-of": "hpt-pipeline"}
    role = {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": cluster_name, "labels": labels},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
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
