"""Look up Vertex Model Registry entries (for uploading new versions of the same model)."""

from typing import Any


def latest_model(
    display_name: str, location: str, project: str | None = None, credentials: Any = None
) -> str | None:
    """Resource name of the newest model called `display_name`, or None.

    `project` None means the environment's (on Vertex Pipelines: the run's project).
    """
    from google.cloud import aiplatform

    models = aiplatform.Model.list(
        filter=f'display_name="{display_name}"',
        order_by="create_time desc",
        project=project,
        location=location,
        credentials=credentials,
    )
    return models[0].resource_name if models else None


def model_uri(resource_name: str, location: str) -> str:
    """The artifact URI GCPC uses for a `google.VertexModel`."""
    return f"https://{location}-aiplatform.googleapis.com/v1/{resource_name}"
