"""Preflight of a Vertex AI run or schedule: what would only fail there is refused here."""

from __future__ import annotations

from pipelines.app.preflight import check_caching_and_study, check_image_uris
from pipelines.settings import Settings, SettingsError


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
    check_caching_and_study(settings)


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
