"""What a local study is: the settings that change what its trials mean, kept with the study.

The first run into an output folder writes `<output>/study/identity.json`: the values of
`settings.STUDY_SETTINGS`, the dataset's fingerprint and the search space's content digest.
A later run into the same folder resumes the study only when those are the same; otherwise
it is refused in one line listing what differs (before anything runs), since its trials
would be mixed with trials of another meaning, unless the output is the default one or the
study never finished a trial: then the old study is kept beside it and a fresh one starts.
A study's folder never moves once made (`<output>/studies/<UTC time>`; `<output>/study`
is a link to the current one), so every path a run records in it (trials, model cards,
lineage) stays true after a fresh study takes the link. Settings not listed (max_trials,
parallel_trials, max_failed_trials, thresholds, final-job workers) may change on resume.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pipelines.lineage import local as local_layout
from pipelines.plan import RunPlan, content_digest, resolve
from pipelines.settings import SECTION_OF, STUDY_SETTINGS, Settings, SettingsError
from pipelines.study import trials as trials_lib

IDENTITY_FILE = "identity.json"
STUDY_DIR = local_layout.STUDY_DIR  # a link into STUDIES_DIR (a folder before issue 51)
STUDIES_DIR = "studies"  # every study's own folder, by the UTC time it was made; never moved


class StudyMismatch(SettingsError):
    """A rerun whose settings would change what the study's trials mean."""


# The data step's settings: with the source's fingerprint, what makes two prepared datasets one.
DATASET_SETTINGS = (
    "image_size",
    "validation_fraction",
    "test_fraction",
    "seed",
    "record_format",
    "max_bad_fraction",
)
DATASETS_DIR = "datasets"  # <output>/datasets/<key>: one folder per source and data settings


def dataset_home(plan: RunPlan, output: Path) -> Path:
    """The run's dataset folder: `<output>/datasets/<source name>-<key>`.

    The key is a digest of the source (its resolved path for a folder), its fingerprint
    (`plan.dataset`: `source_fingerprint`) and `DATASET_SETTINGS`: a rerun with the same ones
    prepares into the same folder, so the data step reuses a finished dataset there and
    resumes an interrupted one (`dataprep.resume`); another source or setting gets a folder
    of its own.
    """
    settings = plan.settings
    source = settings.data.source
    if source != "sample" and not source.startswith(("tfds:", "gs://")):
        source = str(Path(source).resolve())
    values = [source, plan.dataset]
    values += [settings.value(name) for name in DATASET_SETTINGS]
    name = "".join(c if c.isalnum() else "-" for c in source.rstrip("/").rsplit("/", 1)[-1])
    return output / DATASETS_DIR / f"{name[:40]}-{content_digest(values)}"


def identity(plan: RunPlan | Settings) -> dict[str, Any]:
    """The settings that define the study, plus the dataset and search-space digests."""
    plan = plan if isinstance(plan, RunPlan) else resolve(plan)
    settings = plan.settings
    values: dict[str, Any] = {name: settings.value(name) for name in STUDY_SETTINGS}
    if not settings.data.source.startswith(("tfds:", "gs://")) and settings.data.source != "sample":
        values["source"] = str(Path(settings.data.source).resolve())
    values["dataset"] = plan.dataset
    if settings.study.objectives == (
        settings.study.metric_tag,
    ):  # metric_tag alone: as recorded before
        values.pop("objectives", None)
    space = plan.space
    values["search_space_content"] = content_digest(
        [space.to_study_spec_parameters(), space.to_study_spec_metrics()]
    )
    if models := plan.models:  # a model choice: `model` above is each trial's default only
        values["models"] = list(models)
    return values


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """`name: old → new` for each value that differs (a name missing on one side included).

    A setting added to `STUDY_SETTINGS` after the study was recorded is not a difference
    while it keeps its default (the study was made with that default).
    """
    return [
        f"{name}: {recorded.get(name, '(unset)')!r} → {current.get(name, '(unset)')!r}"
        for name in sorted(set(recorded) | set(current))
        if recorded.get(name) != current.get(name)
        and not (name not in recorded and current.get(name) == _default(name))
    ]


def _default(name: str) -> Any:
    """A setting's default (`...` for a recorded value that is no setting, e.g. `dataset`)."""
    return Settings.default(name) if name in SECTION_OF else ...


def _stamped(folder: Path, prefix: str) -> Path:
    """`folder/<prefix><UTC time>`, with `-2`, `-3`… when that name is taken."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = folder / f"{prefix}{stamp}"
    n = 1
    while path.exists() or path.is_symlink():
        n += 1
        path = folder / f"{prefix}{stamp}-{n}"
    return path


def set_aside(study: Path) -> Path:
    """Keep the current study (never resumed again) and free `study` for a fresh one.

    A link (`STUDIES_DIR`) is removed; the folder it named stays where it is, so what was
    recorded in it stays true. A folder of an output made before studies had their own
    folders is renamed `study-<UTC time>` beside it, as it always was.

    Returns:
        Where the kept study is.
    """
    if study.is_symlink():
        kept = study.resolve()
        study.unlink()
        return kept
    kept = _stamped(study.parent, f"{study.name}-")
    study.rename(kept)
    return kept


def study_home(output: Path) -> Path:
    """The current study's own folder (made, and linked from `<output>/study`, if none yet).

    Runs record this path, never the link: a later fresh study takes the link, not the folder.
    """
    study = output / STUDY_DIR
    if study.is_symlink() and not study.exists():  # its folder was deleted by hand
        study.unlink()
    if not study.exists():
        home = _stamped(output / STUDIES_DIR, "")
        home.mkdir(parents=True)
        link = output / f".{STUDY_DIR}.link"
        link.unlink(missing_ok=True)
        link.symlink_to(home.relative_to(output))
        os.replace(link, study)
    return study.resolve()


def check_and_record(
    plan: RunPlan | Settings, output: Path, *, fresh_when_different: bool = False
) -> str | None:
    """Refuse a run that would change the study in `output`; record the study's identity.

    A study of other settings that never finished a trial is no study yet: it is set
    aside (`set_aside`) and a fresh one starts; so is any study of other settings when
    `fresh_when_different` (the default output, `--output` not given).

    Returns:
        A line for the screen when an existing study is resumed (what is reused) or set
        aside for a fresh one, else None.

    Raises:
        StudyMismatch: The folder holds a study of other settings (the message lists them).
    """
    study = output / STUDY_DIR
    path = study / IDENTITY_FILE
    plan = plan if isinstance(plan, RunPlan) else resolve(plan)
    current = json.loads(json.dumps(identity(plan), default=str))
    if path.is_file():
        recorded = json.loads(path.read_text())
        changed = differences(recorded, current)
        counts = trial_counts(study) or {"done": 0, "failed": 0}
        finished = counts["done"] + counts["failed"]
        if changed and (fresh_when_different or not finished):
            kept = set_aside(study)
            _write_identity(study, current)
            return (
                f"note: {output} held a study of other settings ({'; '.join(changed)}); "
                f"kept as {kept}, starting a fresh study"
            )
        if changed:
            raise StudyMismatch(
                f"--output={plan.settings.local.output} holds a study of other settings ("
                + "; ".join(changed)
                + "); rerun with the same settings to resume it, or pass a new --output"
            )
    _write_identity(study, current)
    return resume_line(study)


def _write_identity(study: Path, current: dict[str, Any]) -> None:
    path = study_home(study.parent) / IDENTITY_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def trial_counts(study: Path) -> dict[str, int] | None:
    """Trials of the study in `study` by state: done, failed, to rerun (None: no trials yet)."""
    path = study / trials_lib.TRIALS_FILE
    if not path.is_file():
        return None
    try:
        trials = trials_lib.read_trials(str(path))
    except trials_lib.TrialsError:
        return None
    words = [_outcome(study, t) for t in trials]  # the one failure taxonomy
    return {
        "done": words.count(trials_lib.SUCCEEDED) + words.count(trials_lib.DIVERGED),
        "failed": words.count(trials_lib.FAILED),
        "rerun": words.count(trials_lib.INTERRUPTED) + words.count(trials_lib.RUNNING),
    }


def _outcome(study: Path, trial: dict[str, Any]) -> str:
    """`trials.trial_outcome`, a trial found finished in its folder (the study takes it) as such."""
    from pipelines.jobs.local_job import job_local_dir
    from pipelines.study.trial_runner import load_outcome

    word = trials_lib.trial_outcome(trial)
    if word in (trials_lib.INTERRUPTED, trials_lib.RUNNING):
        kept = load_outcome(job_local_dir(str(study), str(trial["id"])))
        if kept is not None and kept.state == trials_lib.TrialState.SUCCEEDED:
            return trials_lib.SUCCEEDED
    return word


def resume_line(study: Path) -> str | None:
    """What a resumed study reuses and what it reruns (None: nothing to resume)."""
    counts = trial_counts(study)
    if counts is None:
        return None
    return (
        f"resuming the study in {study}: {counts['done']} trial(s) done, reused"
        + (f"; {counts['failed']} failed, kept" if counts["failed"] else "")
        + (f"; {counts['rerun']} interrupted, to rerun" if counts["rerun"] else "")
    )
