"""Preflight of a Kubeflow Pipelines run or recurring run: what the cluster would refuse late."""

from __future__ import annotations

from pipelines.app.preflight import check_caching_and_study, check_image_uris
from pipelines.settings import ENV_PREFIX, Settings, SettingsError
from pipelines.targets.kubeflow import wiring


def check_kubeflow_run(settings: Settings) -> None:
    """Refuse a Kubeflow Pipelines run or recurring run that could only fail on the cluster.

    * no `kubeflow_host` (the KFP API endpoint; `Settings` already refuses one that is
      not an http(s) URL);
    * no data location the trial and replica pods can read: neither `data_pvc` nor a
      gs:// `pipeline_root` (TensorFlow 2.21 reads no s3:// alone, and KFP turns
      minio:// into a path that exists only in its own pods);
    * `kubeflow_namespace: kubeflow` (the default): in a full install Kubeflow's own
      namespace has no Katib collector label and, from 1.11, enforces PSS `restricted`;
    * image URIs still pointing at the placeholder registry (the pods' pulls fail);
    * `enable_caching=True` and a search space the trainer or Katib cannot take, as for
      Vertex (`pipelines/targets/vertex/cli/preflight.py:check_cloud_run`).

    Raises:
        SettingsError: One line naming the setting and how to set it.
    """
    host = settings.kubeflow.kubeflow_host
    if not host:
        raise SettingsError(
            "kubeflow_host is not set: pass --host URL (the Kubeflow Pipelines API, e.g. "
            f"http://localhost:8080 after a port-forward), or set {ENV_PREFIX}KUBEFLOW_HOST"
        )
    wiring.check_settings(settings)  # the namespace and job kind, as compile checks
    if not settings.kubeflow.data_pvc and not (settings.cloud.pipeline_root or "").startswith(
        "gs://"
    ):
        root = settings.cloud.pipeline_root or "unset (KFP's default, minio://mlpipeline)"
        raise SettingsError(
            f"pipeline_root={root} and no data_pvc: the Katib trials and the TFJob could not read "
            "the dataset (KFP maps minio:// and s3:// to paths inside its own pods only); set "
            "data_pvc to a ReadWriteMany PersistentVolumeClaim, or pipeline_root to a gs:// folder"
        )
    check_image_uris(
        settings,
        "push the images to a registry the cluster pulls from and set {env} "
        "(or {name} in --config)",
    )
    # what `manifests` and Katib refuse, before anything is sent (as compile)
    check_caching_and_study(settings, check_space=wiring.BINDING.check_space)
