"""A local study still running: where its trials are, and what its running trials reported.

While `hpt-pipeline run` tunes, the run has no trials artifact yet; the study's own
`trials.json` (under `<output>/study`) holds every trial, and a running trial's hypertune
file (`<study>/<id>/local/`) every epoch it reported so far: the study records a trial's
measurements only when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.jobs.local_job import job_local_dir
from pipelines.lineage.local import STUDY_DIR
from pipelines.study import trials as trials_lib
from pipelines.study.measurements import read_measurements
from pipelines.study.search_space import Metric
from pipelines.study.trial_runner import METRIC_FILE


def trials_of(output: Path) -> tuple[Path, Path, Path] | None:
    """(trials file, `output`, study folder) of the study in `output`; None: no trials yet."""
    study = (output / STUDY_DIR).resolve()
    found = study / trials_lib.TRIALS_FILE
    return (found, output, study) if found.is_file() else None


def is_newer(trials_file: Path, artifact: Mapping[str, Any] | None) -> bool:
    """Whether the study's trials changed after a run's trials artifact was written (or none was).

    A finished run writes its artifact after the study's last change; a run still tuning (a
    fresh study, or a resumed one) changes the study after the newest run's artifact.
    """
    uri = Path((artifact or {}).get("uri", ""))
    return not uri.is_file() or trials_file.stat().st_mtime_ns > uri.stat().st_mtime_ns


def with_progress(
    trials: list[dict[str, Any]], study: Path | None, metrics: Sequence[Metric]
) -> list[dict[str, Any]]:
    """`trials`, each running one given the measurements it reported so far (in place)."""
    if study is None or not metrics:
        return trials
    ids = [m.metric_id for m in metrics]
    for trial in trials:
        if trials_lib.trial_outcome(trial) == trials_lib.RUNNING and not trial.get("measurements"):
            path = Path(job_local_dir(str(study), str(trial["id"]))) / METRIC_FILE
            trial["measurements"] = [
                trials_lib.measurement(m.step, m.metrics) for m in read_measurements(str(path), ids)
            ]
    return trials


def so_far(trial: Mapping[str, Any], shown_as: Callable[[Any], str]) -> str:
    """`epoch N so far: <metric> <value>, …` for a running trial that reported; else empty."""
    if trials_lib.trial_outcome(trial) != trials_lib.RUNNING or not trial.get("measurements"):
        return ""
    last = trial["measurements"][-1]
    values = trials_lib.measurement_metrics(last)
    shown = ", ".join(f"{k} {shown_as(v)}" for k, v in values.items())
    return f"epoch {last.get('stepCount')} so far: {shown}"
