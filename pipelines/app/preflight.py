"""Preflight before anything is sent to a cloud: what would only fail there is refused here."""

from __future__ import annotations

from pipelines.settings import ENV_PREFIX, Settings, SettingsError
from pipelines.study.options import check_algorithm
from pipelines.study.search_space import SearchSpaceError, load_search_space

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
    if settings.pipeline_root and not settings.pipeline_root.startswith("gs://"):
        raise SettingsError(
            f"pipeline_root={settings.pipeline_root}: Vertex AI Pipelines needs a gs:// URI"
        )
    for name in ("trainer_image", "components_image"):
        uri = getattr(settings, name)
        if PLACEHOLDER in uri:
            raise SettingsError(
                f"{name}={uri}: a placeholder; build the images (make images PROJECT=…) and "
                f"set {ENV_PREFIX}{name.upper()} (or {name} in --config), e.g. "
                f"$(make -s image-uris PROJECT=my-project REGION={settings.region})"
            )
    if settings.enable_caching:
        raise SettingsError(
            "enable_caching=True: it would cache every task, the model lookup and the trial "
            "fetch included, which read state outside the run; leave it unset (each task's "
            "compiled caching applies) or pass --no-cache"
        )
    try:
        check_algorithm(load_search_space(settings.search_space), settings.algorithm)
    except SearchSpaceError as err:
        raise SettingsError(str(err)) from None
