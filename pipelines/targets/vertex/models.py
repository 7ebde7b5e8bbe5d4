"""Look up Vertex Model Registry entries (for uploading new versions of the same model)."""

import json
from typing import Any


def latest_model(
    display_name: str, location: str, project: str | None = None, credentials: Any = None
) -> str | None:
    """Resource name of the newest model called `display_name`, or None.

    `project` None means the environment's (on Vertex Pipelines: the run's project).
    """
    from google.cloud import aiplatform

    models = aiplatform.Model.list(
        filter=f"display_name={json.dumps(display_name)}",  # quotes in the name escaped
        order_by="create_time desc",
        project=project,
        location=location,
        credentials=credentials,
    )
    return models[0].resource_name if models else None


def model_uri(resource_name: str, location: str) -> str:
    """The artifact URI GCPC uses for a `google.VertexModel`."""
    return f"https://{location}-aiplatform.googleapis.com/v1/{resource_name}"


def json_string_body(text: str) -> str:
    """`text` as it goes between the quotes of a JSON string (GCPC splices names into JSON)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
