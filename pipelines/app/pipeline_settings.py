"""Settings of the commands that build the pipeline here (`run`, `compile`), checked early.

A source, a model, a search space that could not work fail here, in one line (exit 2),
before any work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from pipelines import plan
from pipelines.app.errors import fail
from pipelines.plan import RunPlan
from pipelines.settings import SettingsError, load_settings
from trainer.contract import PREPARED_METADATA


def check_source(source: str) -> None:
    """Cheap pre-flight check of a dataset source (the prepare step checks the rest)."""
    if source == "sample" or source.startswith("gs://"):
        return
    if source.startswith("tfds:"):
        if not source.removeprefix("tfds:").strip():
            raise SettingsError(f"source={source!r}: expected tfds:<dataset name>")
        return
    if not os.path.isdir(source):
        raise SettingsError(
            f"source={source!r}: expected 'sample', 'tfds:<name>', gs://… "
            "or an existing image folder"
        )
    if os.path.isfile(os.path.join(source, PREPARED_METADATA)):
        raise SettingsError(
            f"source={source!r}: a prepared dataset (`hpt-pipeline prepare`'s output); a run "
            "prepares its source itself (at --image-size): pass the image folder, 'sample' "
            "or tfds:<name> it was prepared from"
        )


TRIAL_WORKERS_HELP = (
    "Workers besides the chief in every trial (default 0): each trial one cluster, "
    "as the final job is."
)


def checked_settings(
    config: Path | None,
    defaults: dict[str, Any] | None,
    *,
    runs_here: bool,
    notes: list[str] | None = None,
    **flags: Any,
) -> RunPlan:
    """Settings from flags > `config` > environment > `defaults`, resolved into the run's plan.

    Args:
        config: The `--config` file.
        defaults: Defaults below the environment (`LOCAL_RUN_DEFAULTS` for `run`).
        runs_here: The pipeline runs on this machine: a team's model module must import.
        notes: Where lines about lowered defaults are appended.
        **flags: Settings fields from the command's flags (None: unset).
    """
    from pipelines.study.search_space import SearchSpaceError

    try:
        settings = load_settings(config=config, overrides=flags, defaults=defaults, notes=notes)
        check_source(settings.data.source)
        # A model that cannot be built, a bad space, or one the algorithm cannot search, or
        # earlier trials that cannot continue the study, fail here, before any work. A run
        # builds the model here: its module must import.
        return plan.resolve(settings, importable=runs_here, runs_here=runs_here, say=typer.echo)
    except (SettingsError, SearchSpaceError) as err:
        fail(str(err))
