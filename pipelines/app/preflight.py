"""Preflight before anything is sent to a cloud: what would only fail there is refused here."""

from __future__ import annotations

from pipelines.settings import ENV_PREFIX, Settings, SettingsError
from pipelines.settings_space import study_space
from pipelines.study.search_space import SearchSpaceError

PLACEHOLDER = "/your-project/"


def check_cloud_run(settings: Settings) -> None:
    """Refuse a run or schedule Vertex would accept and then fail.

    * image URIs still pointing at the placeholder registry (the image pull fails);
    * `enable_caching=True`: the PipelineJob flag overrides every task's compiled
      caching, so the registry lookup and the trial fetch would replay old answers;
    * a search space the trainer or the algorithm cannot take.

    Raises:
        SettingsError: One line naming the setting and how to set it.
    """
    if settings.cloud.pipeline_root and not settings.cloud.pipeline_root.startswith("gs://"):
        raise SettingsError(
            f"pipeline_root={settings.cloud.pipeline_root}: Vertex AI Pipelines needs a gs:// URI"
        )
    check_region(settings.cloud.region)
    check_image_uris(
        settings,
        "build the images (make images PROJECT=…) and set {env} (or {name} in --config), e.g. "
        f"$(make -s image-uris PROJECT=my-project REGION={settings.cloud.region})",
    )
    _check_caching_and_study(settings)


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
    * `enable_caching=True` and a search space the trainer or the algorithm cannot
      take, as for Vertex (`check_cloud_run`).

    Raises:
        SettingsError: One line naming the setting and how to set it.
    """
    host = settings.kubeflow.kubeflow_host
    if not host:
        raise SettingsError(
            "kubeflow_host is not set: pass --host URL (the Kubeflow Pipelines API, e.g. "
            f"http://localhost:8080 after a port-forward), or set {ENV_PREFIX}KUBEFLOW_HOST"
        )
    from pipelines.wiring import kubeflow as kubeflow_wiring

    kubeflow_wiring.check_settings(settings)  # the namespace and job kind, as compile checks
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
    _check_caching_and_study(settings, kubeflow=True)


def check_image_uris(settings: Settings, hint: str) -> None:
    """Refuse image URIs that still point at the placeholder registry.

    Args:
        settings: The trainer and components images are checked.
        hint: How to fix it; `{name}` and `{env}` are filled with the setting's names.

    Raises:
        SettingsError: Naming the image setting and its value.
    """
    for name in ("trainer_image", "components_image"):
        uri = settings.value(name)
        if PLACEHOLDER in uri:
            fix = hint.format(name=name, env=f"{ENV_PREFIX}{name.upper()}")
            raise SettingsError(f"{name}={uri}: a placeholder; {fix}")


def _check_caching_and_study(settings: Settings, *, kubeflow: bool = False) -> None:
    if settings.cloud.enable_caching:
        raise SettingsError(
            "enable_caching=True: it would cache every task, the model lookup and the trial "
            "fetch included, which read state outside the run; leave it unset (each task's "
            "compiled caching applies) or pass --no-cache"
        )
    try:
        space = study_space(settings)
    except SearchSpaceError as err:
        raise SettingsError(str(err)) from None
    if kubeflow:  # what `manifests` and Katib refuse, before anything is sent (as compile)
        from pipelines.wiring import binding_for

        binding_for("kubeflow").check_space(space)


def check_region(region: str) -> None:
    """Refuse a region Vertex AI does not serve, listing those it does (sorted, not a set).

    Raises:
        SettingsError: `region=…: not a Vertex AI region (expected one of …)`.
    """
    from google.cloud.aiplatform.constants import base

    known = sorted(base.SUPPORTED_REGIONS | base.MREP_JURISDICTIONS)
    if region not in known:
        raise SettingsError(
            f"region={region}: not a Vertex AI region (expected one of {', '.join(known)})"
        )
