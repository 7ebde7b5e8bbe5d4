"""A run's plan: what its settings mean, resolved once at the top and read below.

The CLI (`checked_settings`, `compiled`) turns the settings into one `RunPlan`: the model,
the search space, the objectives, the continued trials and the study's display name, each
derived and checked here once; `run_local`, `study_identity`, `build_pipeline` and
`compile_pipeline` read them from the plan instead of deriving them again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.models import KnownModel
from pipelines.settings import Settings, SettingsError
from pipelines.study.continuation import Continued
from pipelines.study.model_choice import models_of
from pipelines.study.search_space import SearchSpace


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One run's settings and what they resolve to (never changed once made).

    Attributes:
        settings: The validated settings (their plain values are read as they are).
        known: The settings' model, checked (`settings_space.settings_model`).
        space: The search space with its metrics (`settings_space.study_space`).
        objectives: The pipeline's `objectives` parameter (`settings_space.listed_objectives`).
        runs_here: The target runs on this machine (its `--output` is not an earlier run).
    """

    settings: Settings
    known: KnownModel
    space: SearchSpace
    objectives: tuple[str, ...]
    runs_here: bool = False

    @functools.cached_property
    def dataset(self) -> str:
        """The dataset source's fingerprint (`source_fingerprint`), computed once when asked."""
        return source_fingerprint(self.settings.data.source)

    @functools.cached_property
    def continued(self) -> Continued | None:
        """The earlier trials the study continues from (`continue_from`), or None; read once.

        Raises:
            SettingsError: The run's own output, or trials that cannot continue this study.
        """
        source = self.settings.study.continue_from
        return _continued(self, source) if source else None

    @property
    def models(self) -> tuple[str, ...]:
        """The models the space chooses among (empty: the settings' model only)."""
        return models_of(self.space)

    @property
    def model_line(self) -> str:
        """The model as a run's first line names it (`a|b (searched)` for a model choice)."""
        choice = self.models
        return f"{'|'.join(choice)} (searched)" if choice else self.settings.architecture.model


def resolve(
    settings: Settings,
    *,
    importable: bool = False,
    runs_here: bool = False,
    say: Callable[[str], None] | None = None,
) -> RunPlan:
    """The settings' plan: model, space, objectives and continuation, each checked once.

    Args:
        settings: The run's settings.
        importable: Refuse a model reference whose module cannot be imported here (`run`).
        runs_here: The target runs on this machine: `continue_from` may not be its output.
        say: Told the line about a model that cannot be checked here, once it is known.

    Raises:
        SettingsError: An unusable model, a continuation that cannot continue this study.
        SearchSpaceError: A space the trainer, the model or the algorithm cannot take.
    """
    from pipelines.settings_space import listed_objectives, settings_model, study_space

    known = settings_model(settings, importable=importable)
    if known.note and say is not None:
        say(f"note: {known.note}; its hyperparameters are checked by the trainer")
    space = study_space(settings, known)
    plan = RunPlan(
        settings=settings,
        known=known,
        space=space,
        objectives=tuple(listed_objectives(settings)),
        runs_here=runs_here,
    )
    _ = plan.continued  # read and checked here, before any work
    return plan


def _continued(plan: RunPlan, source: str) -> Continued | None:
    """The earlier trials `source` names, read and checked against the plan's study.

    Raises:
        SettingsError: The run's own output, or trials that cannot continue this study.
    """
    from pipelines.study.continuation import ContinuationError
    from pipelines.targets import earlier_runs

    settings = plan.settings
    if plan.runs_here and Path(source).resolve() == Path(settings.local.output).resolve():
        raise SettingsError(
            f"continue_from={source}: that is this run's --output; rerun without "
            "--continue-from to extend its study in place (with a higher --max-trials)"
        )
    try:
        return earlier_runs.continued(settings, plan.known, plan.space, dataset=plan.dataset)
    except ContinuationError as err:
        raise SettingsError(str(err)) from None


def content_digest(data: Any) -> str:
    """A short sha256 of `data` as sorted JSON (what a study's identity records)."""
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def source_fingerprint(source: str) -> str:
    """A short fingerprint of a dataset source's content, computed without TensorFlow.

    An image folder: every file's relative path, size and modification time (a file
    added, removed or rewritten changes it). The sample and `tfds:` datasets are named
    by their spec (their content is fixed by the installed packages); gs:// by its path.
    """
    if source == "sample" or source.startswith(("tfds:", "gs://")):
        return source
    root = Path(source)
    entries = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            stat = path.stat()
            entries.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return f"{len(entries)} files, sha256 {content_digest(entries)}"
