"""`continue_from` at the command line: read and checked before any work, said in lines."""

from __future__ import annotations

from pipelines.plan import RunPlan

CONTINUE_HELP = (
    "Continue the study of an earlier run: a local run folder, a trials JSON file (Vertex's "
    "Trial schema), a Vertex HPT or pipeline job resource name, or a Kubeflow run id."
)


def continuation_lines(plan: RunPlan, target: str) -> list[str]:
    """One line per rule applied to the earlier run's trials, then what `target` does.

    The plan has read and checked them (`pipelines.plan.resolve`), before any work.
    """
    from pipelines.targets import earlier_runs

    found = plan.continued
    if found is None:
        return []
    return [*found.notes, earlier_runs.target_line(plan.settings, target, found)]
