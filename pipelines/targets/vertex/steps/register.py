"""Find the model a new upload should become a version of (Vertex target)."""

from google_cloud_pipeline_components.types.artifact_types import VertexModel
from kfp import dsl

from components.base import component


@component
def find_parent_model(
    display_name: str,
    location: str,
    parent_model: str,
    model: dsl.Output[VertexModel],
    json_display_name: dsl.OutputPath(str),  # type: ignore[valid-type]
) -> bool:
    """Point `model` at the model to version; return False when there is none yet.

    `parent_model` (a resource name) wins; otherwise the newest Vertex model
    with `display_name` in this project and region is the parent, so every run
    after the first adds a version instead of a new model. `json_display_name` is
    `display_name` escaped for the JSON string GCPC's upload splices it into (a `"`
    or a backslash in the name would otherwise break the request).
    """
    from pipelines.targets.vertex import models as vertex_models

    with open(json_display_name, "w", encoding="utf-8") as out:
        out.write(vertex_models.json_string_body(display_name))

    name = parent_model or vertex_models.latest_model(display_name, location)
    if not name:
        print(f"no Vertex model named {display_name!r} yet: the upload creates it")
        return False
    model.uri = vertex_models.model_uri(name, location)
    model.metadata["resourceName"] = name
    return True
