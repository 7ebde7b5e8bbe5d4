"""Vertex binding of the final training step, after GCPC's `CustomTrainingJobOp`: its model.

The job itself is GCPC's op (`pipelines/wiring/vertex.py`); this step points a Model
artifact at what the job's chief exported.
"""

from kfp import dsl

from components.base import component


@component
def model_from_job(
    gcp_resources: str,
    base_output_directory: str,
    model: dsl.Output[dsl.Model],
) -> str:
    """Point a Model artifact at the model the Vertex custom job exported; return its URI."""
    from pipelines.jobs import model_artifact

    model_artifact.describe(model, base_output_directory, job=gcp_resources)
    return model.uri
