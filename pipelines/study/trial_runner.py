"""One trial of the local study: the trial's job run through `local_job`, its outcome judged.

Vertex's rules, modelled: the tuned values are appended to every pool's args as
`--<parameter_id>=<value>`; the trial gets `CLOUD_ML_TRIAL_ID` and its own
`CLOUD_ML_HP_METRIC_FILE`; a trial that exits non-zero, times out or reports no
metric with the tag is INFEASIBLE (a failure); a trial the study cancels is not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.jobs import fork_client, local_job
from pipelines.study.measurements import (
    Measurement,
    read_measurements,
    reported_tags,
    select_measurement,
    with_measured_once,
)
from pipelines.study.trials import TrialState
from trainer import precision
from trainer.contract import flag

METRIC_FILE = "hypertune.metrics"
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
    precision: str | None = None  # the policy the trainer resolved (its log's precision line)


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


def fork_session(study: Any) -> contextlib.AbstractContextManager[fork_client.ForkServer | None]:
    """The preloaded trainer the study's trials fork from (`fork_client.session`)."""
    return fork_client.session(
        local_job.pool_commands(study.worker_pool_specs),
        cwd=study.cwd,
        log_path=os.path.join(study.base, fork_client.LOG_FILE),
    )


def run_trial(study: Any, trial: Mapping[str, Any], frozen: Any) -> Outcome:
    """Run one trial as a local custom job (in a worker thread)."""
    trial_id = trial["id"]
    local_dir = local_job.job_local_dir(study.base, trial_id)
    os.makedirs(local_dir, exist_ok=True)
    metric_file = os.path.join(local_dir, METRIC_FILE)
    if os.path.exists(metric_file):
        os.remove(metric_file)
    primary = study.metric_ids[0]
    reported: set[int] = set()
    early_stopped = False

    def on_tick() -> bool:
        nonlocal early_stopped
        if study.cancel.is_set():
            return True
        if not study.early_stopping:
            return False
        for m in read_measurements(metric_file, study.metric_ids):
            if m.step not in reported and primary in m.metrics:
                reported.add(m.step)
                frozen.report(m.metrics[primary], m.step)
                if frozen.should_prune():
                    early_stopped = True
                    return True
        return False

    error: local_job.CustomJobError | None = None
    try:
        result = local_job.run_custom_job(
            trial_specs(study.worker_pool_specs, study._params(trial)),
            study.base,
            trial_id=trial_id,
            extra_env={"CLOUD_ML_TRIAL_ID": trial_id, "CLOUD_ML_HP_METRIC_FILE": metric_file},
            log_dir=local_dir,
            cwd=study.cwd,
            echo=None,
            timeout=study.trial_timeout,
            startup_timeout=TRIAL_STARTUP_TIMEOUT,
            on_tick=on_tick,
            fork_server=study.fork_server,
            jobs_at_once=study.parallel,
        )
        stopped = result.stopped
    except local_job.CustomJobError as err:
        error, stopped = err, False
    # Every tag the trainer reported (its cost, a builder's own) lands in the trial's record.
    tags = [
        *study.metric_ids,
        *(t for t in reported_tags(metric_file) if t not in study.metric_ids),
    ]
    measurements = read_measurements(metric_file, tags)
    final = with_measured_once(
        select_measurement(measurements, study.space.metrics, study.selection), measurements
    )
    outcome = Outcome(trial_id, TrialState.INFEASIBLE, measurements, final)
    chief_log = os.path.join(local_dir, "chief-0.log")
    outcome.precision = precision.parse_line(local_job.head(chief_log))
    if stopped and not early_stopped:
        outcome.cancelled = True
        outcome.reason = "cancelled: the study stopped while this trial ran"
    elif error is not None:
        outcome.reason = error.summary
        outcome.log_tail = error.log_tail
        outcome.exit_code = error.exit_code
    elif final is None or any(m not in final.metrics for m in study.metric_ids):
        seen = reported_tags(metric_file)
        outcome.reason = (
            f"reported no {'/'.join(study.metric_ids)} metric to {metric_file} "
            f"(metrics seen: {', '.join(seen) or 'none'})"
        )
        outcome.log_tail = local_job.tail(chief_log)
        outcome.exit_code = 0
    else:
        outcome.state = TrialState.SUCCEEDED
        outcome.early_stopped = early_stopped
        outcome.exit_code = None if early_stopped else 0
    return outcome
