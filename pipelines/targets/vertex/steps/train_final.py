"""Vertex binding of the final training step, after GCPC's `CustomTrainingJobOp`: its model.

The job itself is GCPC's op (`pipelines/targets/vertex/wiring.py`); `final_scheduling` turns the
`final_scheduling` setting into the op's `strategy` and `max_wait_duration` inputs, and
`model_from_job` points a Model artifact at what the job's chief exported.
"""

from typing import NamedTuple

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


@component
def final_scheduling(
    strategy: str,
    max_wait_hours: float,
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "Scheduling", [("strategy", str), ("max_wait_duration", str)]
):
    """The custom job's `scheduling.strategy` and `max_wait_duration`, as GCPC's op takes them.

    `strategy` is the `final_scheduling` setting (a `--param` may change it at run time);
    a `max_wait_duration` of Vertex's default goes with a strategy that does not queue
    (GCPC's launcher drops it then).
    """
    from collections import namedtuple

    from pipelines.jobs.scheduling import DEFAULT_MAX_WAIT_HOURS, vertex_scheduling

    scheduling = vertex_scheduling(strategy, float(max_wait_hours))
    default = f"{round(DEFAULT_MAX_WAIT_HOURS * 3600)}s"
    Scheduling = namedtuple("Scheduling", ["strategy", "max_wait_duration"])
    return Scheduling(scheduling["strategy"], scheduling.get("max_wait_duration", default))
