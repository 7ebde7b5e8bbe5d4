"""What a tracked step does: check the store first, warm a writer while it waits, write once.

The tune steps of every target that tracks (`StudyTracking`: the study's runs), the
evaluate step (`FinalTracking`: the final job's run) and the local and kubeflow register
steps (`RegisteredTracking`: that run's registered version) share this, so a component holds
two calls, not a copy of the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.tracking import runs, store
from pipelines.tracking.writer import Writer


class StudyTracking:
    """The store `tracking` and `tracking_uri` name, checked now (before any trial)."""

    def __init__(self, tracking: str, tracking_uri: str) -> None:
        self.store = store.open_store(tracking, tracking_uri)
        self.writer = Writer(self.store.uri) if self.store is not None else None

    def record(self, output: Any, trials: list[dict[str, Any]], **study: Any) -> None:
        """Write the study's runs; the trials artifact `output` names the store and study run."""
        if self.store is None:
            return
        tracked = runs.record_study(
            self.store,
            trials,
            writer=self.writer,
            pipeline_run=output.uri.rsplit("/", 2)[0],  # <pipeline root>/<run>/<task>/trials
            **study,
        )
        output.metadata.update(tracked)


class _ShortStepTracking:
    """A writer for a short step's one write to a tracked run; none when `tracked` is {}."""

    def __init__(self, tracked: Mapping[str, Any]) -> None:
        self.tracked = dict(tracked)
        # Not niced: the evaluation or registration it waits beside takes a second or two, less
        # than MLflow's import, so a niced writer was always replaced, its import spent twice.
        uri = self.tracked.get("tracking_uri", "")
        self.writer = Writer(uri, nice=False) if tracked.get("mlflow_run_id") else None


class FinalTracking(_ShortStepTracking):
    """The final job's run beside the study's (`tracked`: the trials artifact's metadata)."""

    def record(self, **final: Any) -> dict[str, str]:
        """Write the run; what the model card keeps of it ({} when untracked or it failed)."""
        if self.writer is None:
            return {}
        run_id = runs.record_final(self.tracked, writer=self.writer, **final)
        return runs.card_entry(self.tracked, run_id)


class RegisteredTracking(_ShortStepTracking):
    """The final job's run, to be tagged with the version registered from it.

    `tracked`: the evaluation's `tracking` metadata (`runs.card_entry`); {} when untracked.
    The writer warms up while the model is registered.
    """

    def record(self, *, model: str, path: str) -> None:
        """Tag the run `hpt.registered_model` = `model` (`name/vN`), `hpt.registry_path`."""
        if self.writer is None:
            return
        runs.record_registered(self.tracked, writer=self.writer, model=model, path=path)
