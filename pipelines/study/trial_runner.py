"""One trial of the local study: the trial's job run through `local_job`, its outcome judged.

Vertex's rules, modelled: the tuned values are appended to every pool's args as
`--<parameter_id>=<value>`; the trial gets `CLOUD_ML_TRIAL_ID` and its own
`CLOUD_ML_HP_METRIC_FILE`; a trial that exits non-zero, times out or reports no
metric with the tag is INFEASIBLE (a failure); a trial the study cancels is not.
A trial that reported the trainer's worst-values report (its loss diverged) is
INFEASIBLE as diverged, its measurements kept: a poor trial, not a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs import fork_client, local_job
from pipelines.study import failure_rules
from pipelines.study import trials as trials_lib
from pipelines.study.measurements import (
    Measurement,
    read_measurements,
    reported_tags,
    select_measurement,
    with_measured_once,
)
from pipelines.study.trials import TrialState
from trainer import precision
from trainer.contract import DIVERGED_METRIC_VALUE, TRAINER, diverged_report, flag

METRIC_FILE = "hypertune.metrics"
EARLIER_METRICS = METRIC_FILE + ".earlier"  # what earlier attempts of the trial reported
OUTCOME_FILE = "outcome.json"  # the trial's judged outcome, durable before the study records it
TRIAL_STARTUP_TIMEOUT = 300.0


@dataclasses.dataclass
class Outcome:
    """What one trial run produced (built in its worker thread)."""

    trial_id: str
    state: TrialState
    measurements: list[Measurement]
    final: Measurement | None
    reason: str = ""
    log_tail: str = ""
    exit_code: int | None = None
    early_stopped: bool = False
    cancelled: bool = False
    ours: str = ""  # stopped by our side (a full disk…): rerun on resume, and stop the study
    diverged: bool = False  # ran to its end, its loss not finite or exploded (`trials.DIVERGED`)
    precision: str | None = None  # the policy the trainer resolved (its log's precision line)
    rung: int | None = None  # successive halving stopped it at this rung (epoch)


def trial_specs(
    worker_pool_specs: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The trial's pools: the study's `worker_pool_specs` with `--<id>=<value>` appended."""
    flags = [flag(k, v) for k, v in params.items()]
    specs = json.loads(json.dumps(worker_pool_specs))
    for pool in specs:
        if "container_spec" in pool:
            pool["container_spec"]["args"] = list(pool["container_spec"].get("args", [])) + flags
        elif "python_package_spec" in pool:
            package = pool["python_package_spec"]
            package["args"] = list(package.get("args", [])) + flags
    return specs


def save_outcome(local_dir: str, outcome: Outcome) -> None:
    """Write `outcome` to the trial's folder durably (fsync, then an atomic rename).

    A run stopped between the trial's end and the study's record then finds the
    outcome on resume (`load_outcome`) and takes a finished trial as finished.
    """
    path = os.path.join(local_dir, OUTCOME_FILE)
    tmp = path + ".tmp"
    record = dataclasses.asdict(outcome)
    record["state"] = int(outcome.state)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_outcome(local_dir: str) -> Outcome | None:
    """The outcome `save_outcome` kept for a trial, or None (none, or unreadable)."""
    try:
        with open(os.path.join(local_dir, OUTCOME_FILE), encoding="utf-8") as f:
            record = json.load(f)
        record["state"] = TrialState(int(record["state"]))
        record["measurements"] = [Measurement(**m) for m in record["measurements"]]
        record["final"] = Measurement(**record["final"]) if record["final"] else None
        return Outcome(**record)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def record(
    old: Mapping[str, Any], outcome: Outcome, local_dir: str, recovered: bool = False
) -> dict[str, Any]:
    """The trial `old` (its record while it ran) finished with `outcome`, in the artifact's schema.

    `recovered`: the outcome was read back from the trial's folder (`load_outcome`).
    """
    start = old.get("startTime")
    started = trials_lib.parse_timestamp(start) if start else None
    measured = outcome.state == TrialState.SUCCEEDED or outcome.diverged
    succeeded = outcome.final is not None and measured
    return trials_lib.make_trial(
        outcome.trial_id,
        trials_lib.trial_parameters(old),
        state=outcome.state,
        final_measurement=(
            trials_lib.measurement(outcome.final.step, outcome.final.metrics)
            if succeeded and outcome.final is not None
            else None
        ),
        measurements=[
            trials_lib.measurement(m.step, m.metrics, m.timestamp - started if started else None)
            for m in outcome.measurements
        ],
        start_time=start,
        end_time=trials_lib.timestamp(),
        infeasible_reason=outcome.reason,
        local={
            **(old.get(trials_lib.LOCAL_KEY) or {}),
            "logPath": os.path.join(local_dir, "chief-0.log"),
            "metricFile": os.path.join(local_dir, METRIC_FILE),
            "exitCode": outcome.exit_code,
            "earlyStopped": outcome.early_stopped,
            "cancelled": outcome.cancelled,
            "precision": outcome.precision,
            "logTail": outcome.log_tail,
            **({"rung": outcome.rung} if outcome.rung is not None else {}),
            **({"recovered": True} if recovered else {}),
        },
    )


def _keep_earlier_measurements(local_dir: str, metric_file: str) -> str:
    """Move a previous attempt's hypertune lines aside (the trainer rewrites its file).

    A rerun trial that resumes from its checkpoint reports only the epochs it still
    runs; the earlier attempt's epochs stay its measurements. Returns the kept file.
    """
    earlier = os.path.join(local_dir, EARLIER_METRICS)
    if os.path.exists(metric_file):
        with (
            open(metric_file, encoding="utf-8") as src,
            open(earlier, "a", encoding="utf-8") as dst,
        ):
            text = src.read()
            dst.write(text if not text or text.endswith("\n") else text + "\n")
        os.remove(metric_file)
    return earlier


def _merged(earlier: Sequence[Measurement], latest: Sequence[Measurement]) -> list[Measurement]:
    """Measurements by step, the latest attempt's winning where both reported a step."""
    by_step = {m.step: m for m in earlier}
    by_step.update({m.step: m for m in latest})
    return [by_step[s] for s in sorted(by_step)]


def fork_session(study: Any) -> contextlib.AbstractContextManager[fork_client.ForkServer | None]:
    """The preloaded trainer the study's trials fork from (`fork_client.session`)."""
    return fork_client.session(
        local_job.pool_commands(study.plan.worker_pool_specs),
        cwd=study.plan.cwd,
        log_path=os.path.join(study.plan.base, fork_client.LOG_FILE),
    )


def run_trial(study: Any, trial: Mapping[str, Any], frozen: Any) -> Outcome:
    """Run one trial as a local custom job (in a worker thread)."""
    trial_id = trial["id"]
    local_dir = _fresh_trial_dir(study.plan.base, trial_id)
    metric_file = os.path.join(local_dir, METRIC_FILE)
    earlier_file = _keep_earlier_measurements(local_dir, metric_file)
    watch = _Watch(study, frozen, metric_file, trial_id, earlier_file)
    error, stopped = _run_job(study, trial, local_dir, watch)
    measurements = _measurements(study.metric_ids, earlier_file, metric_file)
    final = with_measured_once(
        select_measurement(measurements, study.plan.space.metrics, study.plan.selection),
        measurements,
    )
    outcome = Outcome(trial_id, TrialState.INFEASIBLE, measurements, final)
    chief_log = os.path.join(local_dir, "chief-0.log")
    outcome.precision = precision.parse_line(local_job.head(chief_log))
    if stopped and not watch.early_stopped:
        outcome.cancelled = True
        outcome.reason = "cancelled: the study stopped while this trial ran"
    elif error is not None:
        said = failure_rules.trainer_error(error.log_tail)
        outcome.reason = f"{said} (log: {chief_log})" if said else error.summary
        outcome.log_tail = error.log_tail
        outcome.exit_code = error.exit_code
        outcome.ours = failure_rules.out_of_disk(f"{error.log_tail}\n{error.summary}") or ""
    elif final is None or _lacks_objectives(final, study.metric_ids, watch.rung is not None):
        seen = reported_tags(metric_file)
        outcome.reason = (
            f"reported no {'/'.join(study.metric_ids)} metric to {metric_file} "
            f"(metrics seen: {', '.join(seen) or 'none'})"
        )
        outcome.log_tail = local_job.tail(chief_log)
        outcome.exit_code = 0
    elif any(diverged_report(m.metrics) for m in measurements):
        said = _diverged_line(local_job.tail(chief_log))
        outcome.reason = trials_lib.diverged_reason(said)
        outcome.diverged = True
        report = next(m for m in measurements[::-1] if diverged_report(m.metrics))
        worst = {m.metric_id: DIVERGED_METRIC_VALUE[m.goal] for m in study.plan.space.metrics}
        outcome.final = dataclasses.replace(report, metrics={**worst, **report.metrics})
        outcome.exit_code = 0
    else:
        outcome.state = TrialState.SUCCEEDED
        outcome.early_stopped = watch.early_stopped
        outcome.rung = watch.rung
        outcome.exit_code = None if watch.early_stopped else 0
    with contextlib.suppress(OSError):  # a full disk: the study hears it from the outcome
        save_outcome(local_dir, outcome)
    return outcome


def _diverged_line(log_tail: str) -> str:
    """The trainer's own line about the divergence (`training diverged at epoch …`), if any."""
    return next(
        (
            x.split(": ", 1)[1].split(";")[0]
            for x in log_tail.splitlines()[::-1]
            if x.startswith(f"{TRAINER}: training diverged")
        ),
        "",
    )


def _lacks_objectives(final: Measurement, metric_ids: Sequence[str], at_rung: bool) -> bool:
    """Whether `final` misses an objective (stopped at a rung: the primary, ranked there)."""
    return any(m not in final.metrics for m in (metric_ids[:1] if at_rung else metric_ids))


def _fresh_trial_dir(base: str, trial_id: str) -> str:
    """The trial's local folder, made if missing, without an earlier attempt's outcome file."""
    local_dir = local_job.job_local_dir(base, trial_id)
    os.makedirs(local_dir, exist_ok=True)
    for stale in (OUTCOME_FILE, OUTCOME_FILE + ".tmp"):
        if os.path.exists(os.path.join(local_dir, stale)):
            os.remove(os.path.join(local_dir, stale))
    return local_dir


def _run_job(
    study: Any, trial: Mapping[str, Any], local_dir: str, watch: _Watch
) -> tuple[local_job.CustomJobError | None, bool]:
    """Run the trial's custom job: (its error or None, whether the watch stopped it)."""
    trial_id = trial["id"]
    try:
        result = local_job.run_custom_job(
            trial_specs(study.plan.worker_pool_specs, study._params(trial)),
            study.plan.base,
            trial_id=trial_id,
            extra_env={"CLOUD_ML_TRIAL_ID": trial_id, "CLOUD_ML_HP_METRIC_FILE": watch.metric_file},
            log_dir=local_dir,
            cwd=study.plan.cwd,
            echo=None,
            timeout=study.plan.trial_timeout,
            startup_timeout=TRIAL_STARTUP_TIMEOUT,
            on_tick=watch.on_tick,
            fork_server=study.fork_server,
            jobs_at_once=study.plan.parallel,
        )
    except local_job.CustomJobError as err:
        return err, False
    return None, result.stopped


class _Watch:
    """What a running trial is polled for: the study's cancellation, its scheduler's rule."""

    def __init__(
        self, study: Any, frozen: Any, metric_file: str, trial_id: str = "", earlier: str = ""
    ):
        self.study, self.frozen, self.metric_file = study, frozen, metric_file
        self.trial_id, self.earlier = trial_id, earlier
        self.reported: set[int] = set()
        self.early_stopped = False
        self.rung: int | None = None

    def on_tick(self) -> bool:
        """Whether to stop the trial now (each new primary measurement goes to the pruner)."""
        study, primary = self.study, self.study.metric_ids[0]
        if study.cancel.is_set():
            return True
        if study.rungs is not None:
            return self._halving(primary)
        if not study.plan.early_stopping:
            return False
        for m in read_measurements(self.metric_file, study.metric_ids):
            if m.step not in self.reported and primary in m.metrics:
                self.reported.add(m.step)
                self.frozen.report(m.metrics[primary], m.step)
                if self.frozen.should_prune():
                    self.early_stopped = True
                    return True
        return False

    def _halving(self, primary: str) -> bool:
        """Successive halving: stop at the first rung the trial is not promoted from."""
        reported = {
            m.step: m.metrics[primary]
            for m in _measurements([primary], self.earlier, self.metric_file)
            if primary in m.metrics
        }
        self.rung = self.study.rungs.judge(self.trial_id, reported)
        self.early_stopped = self.rung is not None
        return self.early_stopped


def _measurements(metric_ids: Sequence[str], earlier_file: str, metric_file: str) -> list[Any]:
    """The trial's measurements, an earlier attempt's first, of every tag the trainer reported.

    Every tag (its cost, a builder's own) lands in the trial's record, the study's metrics first.
    """
    reported = sorted({*reported_tags(earlier_file), *reported_tags(metric_file)})
    tags = [*metric_ids, *(t for t in reported if t not in metric_ids)]
    return _merged(read_measurements(earlier_file, tags), read_measurements(metric_file, tags))
