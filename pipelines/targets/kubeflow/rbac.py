"""The RBAC the pipeline's service account needs in the namespace it works in.

The tune and train components run as the KFP run's service account and create,
watch and delete Katib Experiments (reading their Trials) and TFJobs, and read
the pods and logs of trials and replicas for progress and errors. `manifests`
returns a `Role` and a `RoleBinding` (rbac.authorization.k8s.io/v1) as dicts,
ready to be written as YAML and applied by a cluster admin.
"""

from __future__ import annotations

from typing import Any

RBAC_API = "rbac.authorization.k8s.io/v1"
JOB_VERBS = ["create", "get", "list", "watch", "delete"]
# A rerun resumes a finished Experiment by raising its trial counts (resumePolicy FromVolume).
EXPERIMENT_VERBS = [*JOB_VERBS, "patch"]
READ_VERBS = ["get", "list", "watch"]
DEFAULT_SERVICE_ACCOUNT = "pipeline-runner"  # the KFP run's account on a standalone install


def rules() -> list[dict[str, Any]]:
    """What the components do: Katib and TFJob objects in full, pods and logs read-only."""
    return [
        {"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": EXPERIMENT_VERBS},
        {"apiGroups": ["kubeflow.org"], "resources": ["trials"], "verbs": JOB_VERBS},
        {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": JOB_VERBS},
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": READ_VERBS},
    ]


def manifests(
    namespace: str,
    service_account: str | None = None,
    *,
    name: str = "hpt-pipeline",
    service_account_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """A Role in `namespace` and the RoleBinding granting it to the service account.

    Args:
        namespace: Where Experiments, Trials and TFJobs are created.
        service_account: The account the pipeline's pods run as
            (default `pipeline-runner`; in a multi-user install `default-editor`).
        name: Name of the Role and the RoleBinding.
        service_account_namespace: The account's namespace (default: `namespace`).
    """
    labels = {"app.kubernetes.io/part-of": "hpt-pipeline"}
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
                "name": service_account or DEFAULT_SERVICE_ACCOUNT,
                "namespace": service_account_namespace or namespace,
            }
        ],
    }
    return [role, binding]
