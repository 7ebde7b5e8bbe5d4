"""`continue_from` at the command line: read and checked before any work, said in lines."""

from __future__ import annotations

from pipelines.app.errors import fail
from pipelines.settings import Settings

CONTINUE_HELP = (
    "Continue the study of an earlier run: a local run folder, a trials JSON file (Vertex's "
    "Trial schema), a Vertex HPT or pipeline job resource name, or a Kubeflow run id."
)


def continuation_lines(settings: Settings, target: str) -> list[str]:
    """One line per rule applied to the earlier run's trials, then what `target` does.

    Refuses (one line, exit 2) earlier trials that cannot continue the settings' study.
    """
    from pipelines.study.continuation import ContinuationError
    from pipelines.targets import earlier_runs

    try:
        found = earlier_runs.continued(settings)
    except ContinuationError as err:
        fail(str(err))
    if found is None:
        return []
    return [*found.notes, earlier_runs.target_line(settings, target, found)]
