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

    Refuses (one line, exit 2) earlier trials that cannot continue the settings' study, and
    locally a run that would continue its own `--output` (extending in place needs no flag).
    """
    from pathlib import Path

    from pipelines.study.continuation import ContinuationError
    from pipelines.targets import earlier_runs
    from pipelines.wiring import TARGETS

    source = settings.study.continue_from
    here = TARGETS[target].runs_here  # only a run here has an --output of its own
    if here and source and Path(source).resolve() == Path(settings.local.output).resolve():
        fail(
            f"continue_from={source}: that is this run's --output; rerun without "
            "--continue-from to extend its study in place (with a higher --max-trials)"
        )

    from pipelines.app.study_identity import source_fingerprint

    try:
        dataset = source_fingerprint(settings.data.source) if source else None
        found = earlier_runs.continued(settings, dataset=dataset)
    except ContinuationError as err:
        fail(str(err))
    if found is None:
        return []
    return [*found.notes, earlier_runs.target_line(settings, target, found)]
