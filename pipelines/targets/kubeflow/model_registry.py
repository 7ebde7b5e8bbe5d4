"""Register the final model in Kubeflow Model Registry (optional; `model_registry_url`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

MODEL_FORMAT = ("tensorflow", "2")  # a SavedModel
AUTHOR = "hpt-pipeline"


def storage_uri(location: str, data_pvc: str, data_mount_path: str) -> str:
    """Where a server outside this pod finds the model: `pvc://<claim>/<path>` on the data claim.

    A path under the claim's mount is only meaningful in pods that mount it; KServe and
    Model Registry's deploy flow read `pvc://<claim>/<path in the claim>`. Object store
    URIs (gs://) are kept as they are.
    """
    root = data_mount_path.rstrip("/") + "/"
    if data_pvc and location.startswith(root):
        return f"pvc://{data_pvc}/{location[len(root) :]}"
    return location


def registry_metadata(metrics: Mapping[str, Any], lineage: Mapping[str, Any]) -> dict[str, Any]:
    """Version metadata Model Registry accepts (str, int, float, bool values only)."""
    found: dict[str, Any] = {}
    for key, value in {**metrics, **lineage}.items():
        if isinstance(value, bool | int | float | str) and value != "":
            found[key] = value
    return found


def register_version(
    *,
    url: str,
    name: str,
    uri: str,
    version: str,
    metrics: Mapping[str, Any],
    lineage: Mapping[str, Any],
    client_factory: Any = None,
) -> dict[str, str]:
    """Add `version` of model `name` at `uri`; returns the registered model and version ids.

    Args:
        url: The registry's REST endpoint (`https://host:port`).
        name: Registered model name (the pipeline's model display name).
        uri: Where the SavedModel is (object store URI or shared-volume path).
        version: A name unique per run (the run's id).
        metrics: Test metrics to keep on the version.
        lineage: Dataset, trials and best trial of the run.
        client_factory: `model_registry.ModelRegistry` (tests pass a stand-in).
    """
    if client_factory is None:
        from model_registry import ModelRegistry

        client_factory = ModelRegistry
    parsed = urlparse(url)
    client = client_factory(
        f"{parsed.scheme}://{parsed.hostname}",
        parsed.port,
        author=AUTHOR,
        is_secure=parsed.scheme == "https",
    )
    model = client.register_model(
        name,
        uri,
        model_format_name=MODEL_FORMAT[0],
        model_format_version=MODEL_FORMAT[1],
        version=version,
        description="Tuned with Katib and trained with a TFJob by hpt-pipeline",
        metadata=registry_metadata(metrics, lineage),
    )
    return {"registered_model_id": str(getattr(model, "id", "")), "version": version}
