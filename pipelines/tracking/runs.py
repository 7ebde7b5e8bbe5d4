"""A study as MLflow runs: one study run, a nested run per trial, and the final job's run.

Written from the trials artifact once the study is over, so every trial's run says exactly
what the trials JSON says (each measurement a metric at its step). MLflow is imported only
where the runs are written (a step's writer process, `pipelines/tracking/writer.py`), never
by a trial or a step itself. `trial_run` is the pure part (a trial → what its run holds);
`write_study` and `write_final` talk to the store through `MlflowClient`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.study import continuation
from pipelines.study import trials as trials_lib
from pipelines.tracking.store import Store

KIND_TAG = "hpt.kind"  # study | trial | final
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own nesting tag
REGISTERED_TAG = "hpt.registered_model"  # the final job's run: `<name>/v<N>` registered from it
FINAL_PREFIX = "final_"  # the final measurement's metrics (the one selection used)
TAG_LIMIT = 8000  # MLflow's longest tag value
_STATUS = {
    trials_lib.SUCCEEDED: "FINISHED",
    trials_lib.FAILED: "FAILED",
    trials_lib.INTERRUPTED: "KILLED",
}


@dataclasses.dataclass(frozen=True)
class RunContent:
    """What one MLflow run holds (metrics: `(key, value, timestamp ms, step)`)."""

    name: str
    params: dict[str, str]
    metrics: list[tuple[str, float, int, int]]
    tags: dict[str, str]
    status: str = "FINISHED"
    start_ms: int | None = None
    end_ms: int | None = None
    artifacts: tuple[str, ...] = ()


def _ms(stamp: str | None) -> int | None:
    return int(trials_lib.parse_timestamp(stamp) * 1000) if stamp else None


def _elapsed_ms(m: Mapping[str, Any]) -> int:
    raw = str(m.get("elapsedDuration", "0s")).removesuffix("s")
    return int(float(raw or 0) * 1000)


def trial_run(trial: Mapping[str, Any]) -> RunContent:
    """A trial's run: its parameters, every measurement per step, its outcome, rung, origin, log."""
    start = _ms(trial.get("startTime"))
    end = _ms(trial.get("endTime"))
    base = start if start is not None else int(time.time() * 1000)
    metrics = [
        (key, value, base + _elapsed_ms(m), int(m.get("stepCount", 0)))
        for m in trial.get("measurements", [])
        for key, value in trials_lib.measurement_metrics(m).items()
    ]
    final = trial.get("finalMeasurement")
    if final:
        metrics += [
            (FINAL_PREFIX + key, value, end or base, int(final.get("stepCount", 0)))
            for key, value in trials_lib.measurement_metrics(final).items()
        ]
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    outcome = trials_lib.trial_outcome(trial)
    tags = {
        KIND_TAG: "trial",
        "hpt.trial_id": str(trial["id"]),
        "hpt.outcome": outcome,
        "hpt.state": trials_lib.trial_state(trial).name,
        "hpt.origin": continuation.origin(trial) or "this run",
        "hpt.early_stopped": str(bool(local.get("earlyStopped"))).lower(),
    }
    if "rung" in local:
        tags["hpt.rung"] = str(local["rung"])
    if trial.get("infeasibleReason"):
        tags["hpt.reason"] = str(trial["infeasibleReason"])[:TAG_LIMIT]
    log = local.get("logPath")
    return RunContent(
        name=f"trial-{trial['id']}",
        params={k: str(v) for k, v in trials_lib.trial_parameters(trial).items()},
        metrics=metrics,
        tags=tags,
        status=_STATUS.get(outcome, "RUNNING"),
        start_ms=start,
        end_ms=end,
        artifacts=(log,) if isinstance(log, str) and os.path.isfile(log) else (),
    )


def study_tags(
    *, pipeline_run: str, target: str, dataset_fingerprint: str, search_space: Sequence[Any]
) -> dict[str, str]:
    """The study run's tags: the pipeline run, target, dataset fingerprint and search space."""
    space = json.dumps(list(search_space), sort_keys=True)
    return {
        KIND_TAG: "study",
        "hpt.pipeline_run": pipeline_run,
        "hpt.target": target,
        "hpt.dataset_fingerprint": dataset_fingerprint or "unknown",
        "hpt.search_space": space if len(space) <= TAG_LIMIT else "see search_space.json",
    }


def open_client(uri: str) -> Any:
    """An `MlflowClient` for the store at `uri`, opened (a new SQLite store: created)."""
    import logging

    from mlflow.tracking import MlflowClient  # late: only the writer process imports MLflow

    for name in ("mlflow", "alembic"):  # their INFO lines (a new database's migrations) are noise
        logging.getLogger(name).setLevel(logging.WARNING)
    _create_whole(uri, MlflowClient)
    opened = MlflowClient(tracking_uri=uri)
    opened.search_experiments(max_results=1)  # the store itself, not only the import
    return opened


def _create_whole(uri: str, client_class: Any) -> None:
    """Create a new SQLite store under another name and link it into place once whole.

    A writer may be killed while it creates the store (a starved one is replaced): the
    half-made tables would fail every later write (`index … already exists`). Partial
    stores of writers no longer alive are removed.
    """
    if not uri.startswith("sqlite:///"):
        return
    path = Path(uri[len("sqlite:///") :])
    if path.exists():
        return
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)  # this process's own earlier attempt
    client_class(tracking_uri=f"sqlite:///{partial}").search_experiments(max_results=1)
    try:
        os.link(partial, path)  # atomic, and never over a store another writer made first
    except FileExistsError:
        pass
    for stale in path.parent.glob(f"{path.name}.partial-*"):
        if stale == partial or not _alive(stale.name.rsplit("-", 1)[-1]):
            stale.unlink(missing_ok=True)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _experiment_id(client: Any, store: Store, name: str) -> str:
    """The parent run's experiment (a nested run must share it), else `name`'s (created)."""
    if store.parent_run_id:
        return str(client.get_run(store.parent_run_id).info.experiment_id)
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name, artifact_location=store.artifact_root or None))


def _create(client: Any, experiment_id: str, run: RunContent, parent: str = "") -> str:
    """Create the run for `run` (nested under `parent` when given); its id."""
    tags = {**run.tags, **({PARENT_TAG: parent} if parent else {})}
    created = client.create_run(
        experiment_id, start_time=run.start_ms, tags=tags, run_name=run.name
    )
    return str(created.info.run_id)


def _write(client: Any, experiment_id: str, run: RunContent, parent: str = "") -> str:
    """A finished run holding `run`; its id."""
    from mlflow.entities import Metric, Param

    run_id = _create(client, experiment_id, run, parent)
    params = [Param(k, v) for k, v in run.params.items()]
    metrics = [Metric(k, v, ts, step) for k, v, ts, step in run.metrics]
    for at in range(0, len(params), 100):  # log_batch takes at most 100 params, 1000 metrics
        client.log_batch(run_id, params=params[at : at + 100])
    for at in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[at : at + 1000])
    for path in run.artifacts:
        client.log_artifact(run_id, path)
    client.set_terminated(run_id, status=run.status, end_time=run.end_ms)
    return run_id


def write_study(
    store: Store,
    trials: Sequence[Mapping[str, Any]],
    *,
    experiment: str,
    pipeline_run: str,
    target: str,
    dataset_fingerprint: str = "",
    search_space: Sequence[Any] = (),
    client: Any = None,
) -> dict[str, str]:
    """The study run (nested under KFP's task run when there is one) and a run per trial.

    `client`: an open client for `store` (`client`), else one is opened here.

    Returns:
        `{"tracking_uri", "mlflow_experiment_id", "mlflow_run_id"}` (the study run's), what
        the tune step adds to the trials artifact's metadata for the final job's run.
    """
    import tempfile

    client = client or open_client(store.uri)
    experiment_id = _experiment_id(client, store, experiment or "hpt-pipeline")
    tags = study_tags(
        pipeline_run=pipeline_run,
        target=target,
        dataset_fingerprint=dataset_fingerprint,
        search_space=search_space,
    )
    name = "study-" + pipeline_run.rstrip("/").rsplit("/", 1)[-1]
    study_id = _create(client, experiment_id, RunContent(name, {}, [], tags), store.parent_run_id)
    with tempfile.TemporaryDirectory() as folder:
        space_file = os.path.join(folder, "search_space.json")
        with open(space_file, "w", encoding="utf-8") as f:
            json.dump(list(search_space), f, indent=2)
        client.log_artifact(study_id, space_file)
    for trial in trials:
        _write(client, experiment_id, trial_run(trial), parent=study_id)
    client.set_terminated(study_id, status="FINISHED")
    return {
        "tracking_uri": store.uri,
        "mlflow_experiment_id": experiment_id,
        "mlflow_run_id": study_id,
    }


def record_study(
    store: Store | None,
    trials: Sequence[Mapping[str, Any]],
    say: Any = print,
    writer: Any = None,
    **study: Any,
) -> dict[str, str]:
    """`write_study` for a tune step: {} when untracked or when writing fails (said in one line).

    Tracking never fails a study: the one refusal is `store.open_store`'s, before any trial.
    `writer`: a `writer.Writer` warmed up while the trials ran, which writes in its process.
    """
    if store is None:
        return {}
    try:
        if writer is None:
            tracked = write_study(store, trials, **study)
        else:
            request = {"store": dataclasses.asdict(store), "trials": list(trials), "study": study}
            tracked = writer.ask({"write": "study", **request})
    except Exception as err:  # noqa: BLE001 - any store failure: the study's results stand
        say(f"tracking: writing the study's runs to {store.uri} failed ({err}); not tracked")
        return {}
    say(f"tracking: study run {tracked['mlflow_run_id']}; see it with {store.ui_command()}")
    return dict(tracked)


def write_final(
    tracked: Mapping[str, str],
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    client: Any = None,
) -> str:
    """The final job's run beside the study run `tracked` (`write_study`'s return); its id."""
    client = client or open_client(str(tracked["tracking_uri"]))
    now = int(time.time() * 1000)
    run = RunContent(
        name="final",
        params={k: str(v) for k, v in params.items()},
        metrics=[(k, float(v), now, 0) for k, v in metrics.items()],
        tags={KIND_TAG: "final", "hpt.study_run_id": str(tracked["mlflow_run_id"]), **tags},
        start_ms=now,
        end_ms=now,
    )
    return _write(client, str(tracked["mlflow_experiment_id"]), run)


def write_registered(
    tracked: Mapping[str, str], *, model: str, path: str, client: Any = None
) -> str:
    """Tag the final job's run (`card_entry`'s) with the version registered from it; its id."""
    client = client or open_client(str(tracked["tracking_uri"]))
    run_id = str(tracked["mlflow_run_id"])
    client.set_tag(run_id, REGISTERED_TAG, model)
    client.set_tag(run_id, "hpt.registry_path", path)
    return run_id


def record_registered(
    tracked: Mapping[str, Any], say: Any = print, writer: Any = None, **registered: Any
) -> None:
    """`write_registered` for the register step; a failure is said, the model stays registered."""
    if not tracked.get("mlflow_run_id"):
        return
    try:
        if writer is None:
            write_registered(tracked, **registered)
        else:
            writer.ask({"write": "registered", "tracked": dict(tracked), "registered": registered})
    except Exception as err:  # noqa: BLE001 - the model is registered all the same
        run = tracked["mlflow_run_id"]
        say(f"tracking: tagging run {run} with {registered.get('model')} failed ({err})")


def card_entry(tracked: Mapping[str, Any], final_run: str) -> dict[str, str]:
    """What a model card keeps of the final job's run: its id and store ({} when untracked)."""
    if not final_run:
        return {}
    return {"mlflow_run_id": final_run, "tracking_uri": str(tracked["tracking_uri"])}


def record_final(
    tracked: Mapping[str, Any], say: Any = print, writer: Any = None, **final: Any
) -> str:
    """`write_final` for the evaluate step: "" when the study was untracked or writing fails."""
    if not tracked.get("mlflow_run_id"):
        return ""
    try:
        if writer is None:
            return write_final(tracked, **final)
        return str(writer.ask({"write": "final", "tracked": dict(tracked), "final": final}))
    except Exception as err:  # noqa: BLE001 - the evaluation stands all the same
        say(f"tracking: writing the final job's run to {tracked['tracking_uri']} failed ({err})")
        return ""
