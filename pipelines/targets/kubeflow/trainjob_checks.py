"""What a TrainJob needs from the cluster: its override field, the runtime, Katib allowed to run it.

Read before anything is created, each failing in one line with the remedy, each 403 said and
skipped (the checks help, they ask for no new permission; `rbac.yaml` grants what they read):

* the TrainJob schema's override field, from the server's OpenAPI document
  (`/openapi/v3/apis/trainer.kubeflow.org/v1alpha1`, readable by any account):
  `podTemplateOverrides` (Trainer v2.1) or `runtimePatches` (v2.2+);
* the TensorFlow `ClusterTrainingRuntime` `manifests` writes, installed;
* for TrainJob trials, the katib-controller's trial resources: ConfigMap `katib-config` in
  Katib's namespace (`init.controller.trialResources`, read by the controller at start:
  kubeflow/katib v0.19.0 `cmd/katib-controller/v1beta1/main.go`), which must list
  `TrainJob.v1alpha1.trainer.kubeflow.org` (Katib 0.19's installs do).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipelines.targets.kubeflow import kube, trainjob
from pipelines.targets.kubeflow.rbac import KATIB_CONFIG, KATIB_NAMESPACE
from pipelines.targets.kubeflow.trial_trainjob import TRIAL_RESOURCE
from pipelines.targets.kubeflow.waiting import KubeflowJobError

OPENAPI_PATH = f"/openapi/v3/apis/{trainjob.GROUP}/{trainjob.VERSION}"
KATIB_CONFIG_KEY = "katib-config.yaml"  # its file in the ConfigMap (Katib's configMapGenerator)


def trainjob_override_field(custom: Any) -> str:
    """The cluster's TrainJob override field, from its OpenAPI document (`trainjob.override_field`).

    Raises:
        KubeflowJobError: The document names neither field (one line).
    """
    from kubernetes.client import ApiException

    try:
        document = custom.api_client.call_api(
            OPENAPI_PATH,
            "GET",
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as err:
        raise KubeflowJobError(f"{OPENAPI_PATH}: {kube.api_error_line(err)}") from None
    field = trainjob.override_field(document) if isinstance(document, Mapping) else None
    if field is None:
        raise KubeflowJobError(
            f"{OPENAPI_PATH}: the TrainJob schema has neither "
            f"{' nor '.join(trainjob.OVERRIDE_FIELDS)}: expected Kubeflow Trainer v2.1 or later"
        )
    return field


def check_runtime(custom: Any, echo: Callable[[str], None] = print) -> None:
    """The TensorFlow ClusterTrainingRuntime is installed (403: said and not checked).

    Raises:
        KubeflowJobError: It is not, naming the file that installs it.
    """
    from kubernetes.client import ApiException

    plural = trainjob.RUNTIME_PLURALS[trainjob.CLUSTER_RUNTIME]
    what = f"{trainjob.CLUSTER_RUNTIME} {trainjob.RUNTIME_NAME}"
    try:
        custom.get_cluster_custom_object(
            trainjob.GROUP, trainjob.VERSION, plural, trainjob.RUNTIME_NAME
        )
    except ApiException as err:
        if err.status == 403:
            echo(f"{what}: not readable by this service account, not checked")
            return
        if err.status == 404:
            raise KubeflowJobError(
                f"{what}: not installed; apply the trainjob/trainingruntime.yaml that "
                "`hpt-pipeline manifests --target kubeflow` writes (cluster admin)"
            ) from None
        raise KubeflowJobError(f"{what}: {kube.api_error_line(err)}") from None
    echo(f"{what}: installed")


def katib_trial_resources(core: Any, echo: Callable[[str], None] = print) -> list[str] | None:
    """The kinds katib-controller runs as trials (`trialResources`); None when not readable."""
    import yaml
    from kubernetes.client import ApiException

    where = f"ConfigMap {KATIB_NAMESPACE}/{KATIB_CONFIG}"
    try:
        found = core.read_namespaced_config_map(KATIB_CONFIG, KATIB_NAMESPACE)
    except ApiException as err:
        if err.status in (403, 404):
            why = "not readable by this service account" if err.status == 403 else "not found"
            echo(f"{where}: {why}, Katib's trial resources not checked")
            return None
        raise KubeflowJobError(f"{where}: {kube.api_error_line(err)}") from None
    config = yaml.safe_load((found.data or {}).get(KATIB_CONFIG_KEY) or "") or {}
    controller = ((config.get("init") or {}).get("controller")) or {}
    return [str(r) for r in controller.get("trialResources") or []]


def check_katib_runs_trainjobs(core: Any, echo: Callable[[str], None] = print) -> None:
    """Katib's controller is configured to run TrainJob trials (where its config is readable).

    Raises:
        KubeflowJobError: `katib-config` lists trial resources without the TrainJob.
    """
    resources = katib_trial_resources(core, echo)
    if resources is None:
        return
    if TRIAL_RESOURCE not in resources:
        raise KubeflowJobError(
            f"ConfigMap {KATIB_NAMESPACE}/{KATIB_CONFIG}: trialResources lacks {TRIAL_RESOURCE} "
            "(multi-node trials, trial_workers > 0, run as TrainJobs): use Katib 0.19+ "
            "and add it under init.controller.trialResources, apply the katib-controller "
            "ClusterRole `hpt-pipeline manifests` writes (trainjob/katib.yaml), "
            "restart katib-controller; or set trial_workers: 0"
        )
    echo(f"ConfigMap {KATIB_NAMESPACE}/{KATIB_CONFIG}: Katib runs {TRIAL_RESOURCE} trials")
