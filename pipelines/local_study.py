"""Run a Vertex HPT study payload on this machine: Optuna suggests, `local_job` runs each trial.

`run_study` takes exactly what GCPC's `HyperparameterTuningJobRunOp` takes, plus
local options. What Vertex does, done here:

* Search: `ALGORITHM_UNSPECIFIED` (Vertex: Bayesian optimisation) → Optuna TPE;
  `RANDOM_SEARCH` → random; `GRID_SEARCH` → every grid point once, in order
  (integer, discrete and categorical parameters only; the study ends when the
  grid is exhausted). Doubles and integers on a log scale are sampled in log
  space. `reverse_log` (Vertex: values near the top of the range spread out) is
  sampled as `min + max - y` with `y` log-uniform on `[min, max]`, so samples
  crowd towards `max`. Discrete values are a categorical choice for the sampler.
  Conditional parameters are suggested only when their parent takes one of
  their `parent_values`.
* Trials: each is a custom job through `local_job` (the trial's
  `worker_pool_specs` with `--<parameter_id>=<value>` appended to every pool's
  args) with `CLOUD_ML_TRIAL_ID`, a per-trial `CLOUD_ML_HP_METRIC_FILE`, and the
  `AIP_*` directories under `<base>/<trial_id>/`. Up to `parallel_trial_count`
  run at once.
* Metric: read from the trial's hypertune file; the final measurement is the
  best or the last one (`study_spec_measurement_selection_type`). A trial that
  exits non-zero, times out, or reports no metric with the tag is failed
  (INFEASIBLE, with the reason and its log tail).
* Failures: with `max_failed_trial_count` = 0, the study stops when the first
  trial fails, or once at least 3 trials have failed and failures outnumber
  successes (Vertex "decides" there; this is the local stand-in). Otherwise it
  stops when more than `max_failed_trial_count` trials have failed. The study
  then raises `StudyError` saying why.
* Early stopping (opt-in, `early_stopping=True`): Vertex's median rule via
  Optuna's `MedianPruner` on the per-epoch measurements read while a trial runs;
  a stopped trial is killed and recorded SUCCEEDED with `local.earlyStopped`.
* Resume: the study lives in `<base>/trials.json` and `<base>/study.json`. Running
  again with the same base replays finished trials into the sampler, re-runs
  the interrupted ones (same id and parameters) and never re-runs a finished one.
  `max_trial_count` may be raised to extend a finished study; the space,
  metrics, algorithm and selection may not change. A study stopped by the
  failure rules stays stopped (it raises again): use a new base to start over.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pipelines import local_job
from pipelines import trials as trials_lib
from pipelines.search_space import Metric, Parameter, SearchSpace, SearchSpaceError, from_study_spec
from pipelines.trials import TrialState

STUDY_FILE = "study.json"
METRIC_FILE = "hypertune.metrics"
MAX_GRID_POINTS = 100_000
# With max_failed_trial_count=0: stop once this many trials failed and failures outnumber successes.
DEFAULT_FAILURE_FLOOR = 3
TRIAL_STARTUP_TIMEOUT = 300.0


class StudyError(RuntimeError):
    """The study cannot start, or stopped under the failure rules (message says why)."""


@dataclasses.dataclass(frozen=True)
class EarlyStopping:
    """The median stopping rule (Optuna `MedianPruner`).

    Attributes:
        min_trials: Completed trials needed before any trial can be stopped.
        warmup_steps: Steps (epochs) below this are never judged.
    """

    min_trials: int = 3
    warmup_steps: int = 1


@dataclasses.dataclass(frozen=True)
class StudyProgress:
    """Where a study stands; given to `on_progress` after every change."""

    total: int
    done: int
    succeeded: int
    failed: int
    early_stopped: int
    running: int
    best: dict[str, Any] | None
    last: dict[str, Any] | None


# --- the search space in Optuna's terms ----------------------------------------------------------


def distribution(p: Parameter) -> Any:
    """The Optuna distribution of `p`'s internal value (see `to_external` for reverse_log)."""
    import optuna

    log = p.scale in ("log", "reverse_log")
    if p.type == "double":
        return optuna.distributions.FloatDistribution(float(p.min), float(p.max), log=log)  # type: ignore[arg-type]
    if p.type == "integer":
        return optuna.distributions.IntDistribution(int(p.min), int(p.max), log=log)  # type: ignore[arg-type]
    return optuna.distributions.CategoricalDistribution(list(p.values))


def to_external(p: Parameter, internal: Any) -> Any:
    """Sampler value → trial value (`reverse_log`: reflected, min + max - y)."""
    if p.scale == "reverse_log" and p.type in ("double", "integer"):
        assert p.min is not None and p.max is not None
        reflected = min(max(p.min + p.max - float(internal), p.min), p.max)  # clamp rounding
        return int(round(reflected)) if p.type == "integer" else float(reflected)
    return p.cast(internal)


def to_internal(p: Parameter, external: Any) -> Any:
    """Trial value → sampler value (the inverse of `to_external`)."""
    return to_external(p, external) if p.scale == "reverse_log" else p.cast(external)


def suggest(trial: Any, parameters: Sequence[Parameter]) -> dict[str, Any]:
    """Ask an Optuna trial for values of `parameters` and their active conditional children."""
    import optuna

    values: dict[str, Any] = {}
    for p in parameters:
        d = distribution(p)
        if isinstance(d, optuna.distributions.FloatDistribution):
            internal = trial.suggest_float(p.parameter_id, d.low, d.high, log=d.log)
        elif isinstance(d, optuna.distributions.IntDistribution):
            internal = trial.suggest_int(p.parameter_id, d.low, d.high, log=d.log)
        else:
            internal = trial.suggest_categorical(p.parameter_id, d.choices)
        values[p.parameter_id] = to_external(p, internal)
        values.update(suggest(trial, p.active_children(values[p.parameter_id])))
    return values


def grid_points(parameters: Sequence[Parameter]) -> list[dict[str, Any]]:
    """Every grid point (conditional children expanded only where active), in order."""

    def expand(params: Sequence[Parameter]) -> Iterator[dict[str, Any]]:
        if not params:
            yield {}
            return
        head, rest = params[0], params[1:]
        for value in head.feasible_values():
            for below in expand(head.active_children(value)):
                for others in expand(rest):
                    yield {head.parameter_id: head.cast(value), **below, **others}

    points = list(itertools.islice(expand(parameters), MAX_GRID_POINTS + 1))
    if len(points) > MAX_GRID_POINTS:
        raise SearchSpaceError(f"grid search: more than {MAX_GRID_POINTS} grid points")
    return points


def make_sampler(algorithm: str, seed: int | None, max_trial_count: int) -> Any:
    """The Optuna sampler for a Vertex `study_spec_algorithm` (grid points are enqueued)."""
    import optuna

    if algorithm == "ALGORITHM_UNSPECIFIED":
        startup = max(2, min(10, max_trial_count // 3))
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)
    return optuna.samplers.RandomSampler(seed=seed)


# --- measurements --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The metrics a trial reported at one step, and when."""

    step: int
    metrics: dict[str, float]
    timestamp: float


def read_measurements(path: str, metric_ids: Sequence[str]) -> list[Measurement]:
    """Measurements in a hypertune metric file, by step (a later report of a step wins).

    Lines that are not complete JSON (the file is rewritten on every report) are skipped.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    by_step: dict[int, Measurement] = {}
    for line in lines:
        try:
            record = json.loads(line)
            step = int(float(record.get("global_step", 0)))
            found = {m: float(record[m]) for m in metric_ids if m in record}
        except (ValueError, TypeError, AttributeError):
            continue
        if found:
            previous = by_step.get(step)
            merged = {**(previous.metrics if previous else {}), **found}
            by_step[step] = Measurement(step, merged, float(record.get("timestamp", 0.0)))
    return [by_step[s] for s in sorted(by_step)]


def reported_tags(path: str) -> list[str]:
    """Metric tags present in a hypertune file (whatever the study asked for)."""
    bookkeeping = {"timestamp", "trial", "global_step", "checkpoint_path"}
    tags: set[str] = set()
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    tags.update(k for k in json.loads(line) if k not in bookkeeping)
                except (ValueError, TypeError):
                    continue
    except OSError:
        pass
    return sorted(tags)


def select_measurement(
    measurements: Sequence[Measurement], metrics: Sequence[Metric], selection: str
) -> Measurement | None:
    """The final measurement: the best (by the first metric) or the last one that has it."""
    primary = metrics[0]
    candidates = [m for m in measurements if primary.metric_id in m.metrics]
    if not candidates:
        return None
    if selection == "LAST_MEASUREMENT":
        return candidates[-1]
    sign = 1.0 if primary.goal == "maximize" else -1.0
    return max(candidates, key=lambda m: (sign * m.metrics[primary.metric_id], -m.step))


def best_trial(trials: Sequence[Mapping[str, Any]], metric: Metric) -> dict[str, Any] | None:
    """The succeeded trial with the best final `metric` (None when there is none)."""
    scored = [
        (value, t)
        for t in trials
        if trials_lib.trial_state(t) == TrialState.SUCCEEDED
        and (value := trials_lib.final_metric(t, metric.metric_id)) is not None
    ]
    if not scored:
        return None
    pick = max if metric.goal == "maximize" else min
    return dict(pick(scored, key=lambda vt: vt[0])[1])


# --- the study -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Outcome:
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


def _local(trial: Mapping[str, Any]) -> dict[str, Any]:
    return dict(trial.get(trials_lib.LOCAL_KEY) or {})


def _counts_as_failed(trial: Mapping[str, Any]) -> bool:
    return trials_lib.trial_state(trial) == TrialState.INFEASIBLE and not _local(trial).get(
        "cancelled"
    )


class _LocalStudy:
    """State and loop of one study (see `run_study`)."""

    def __init__(
        self,
        *,
        space: SearchSpace,
        spec_payload: dict[str, Any],
        worker_pool_specs: list[dict[str, Any]],
        base: str,
        max_trial_count: int,
        parallel_trial_count: int,
        max_failed_trial_count: int,
        algorithm: str,
        selection: str,
        early_stopping: EarlyStopping | None,
        seed: int | None,
        trial_timeout: float | None,
        on_progress: Callable[[StudyProgress], None] | None,
        show_progress: bool,
        cwd: str | None,
    ):
        self.space = space
        self.spec_payload = spec_payload
        self.worker_pool_specs = worker_pool_specs
        self.base = base
        self.max_trial_count = max_trial_count
        self.parallel = parallel_trial_count
        self.max_failed = max_failed_trial_count
        self.algorithm = algorithm
        self.selection = selection
        self.early_stopping = early_stopping
        self.trial_timeout = trial_timeout
        self.on_progress = on_progress
        self.show_progress = show_progress
        self.cwd = cwd
        self.metric_ids = [m.metric_id for m in space.metrics]
        self.params_by_id = {p.parameter_id: p for p in space.all_parameters()}
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.trials: dict[str, dict[str, Any]] = {}
        self.grid = grid_points(space.parameters) if algorithm == "GRID_SEARCH" else None
        self.trials_path = os.path.join(base, trials_lib.TRIALS_FILE)
        self.study_path = os.path.join(base, STUDY_FILE)
        self._load()
        self.optuna = self._make_optuna_study(seed)
        self.console: Any = None
        self.progress: Any = None
        self.progress_task: Any = None

    # --- persistence -------------------------------------------------------------------------

    def _load(self) -> None:
        if os.path.exists(self.study_path):
            with open(self.study_path, encoding="utf-8") as f:
                saved = json.load(f)
            spec = saved.get("studySpec", {})
            try:
                same = (
                    from_study_spec(spec.get("parameters", []), spec.get("metrics", []))
                    == self.space
                    and spec.get("algorithm") == self.algorithm
                    and spec.get("measurementSelectionType") == self.selection
                )
            except SearchSpaceError:
                same = False
            if not same:
                raise StudyError(
                    f"{self.base} already holds a different study (parameters, metrics, algorithm "
                    "or measurement selection differ); use another base_output_directory"
                )
        if os.path.exists(self.trials_path):
            for t in trials_lib.read_trials(self.trials_path):
                self.trials[t["id"]] = t

    def _save(self, state: str = "ACTIVE", reason: str = "") -> None:
        trials = self._ordered()
        trials_lib.write_trials(self.trials_path, trials)
        best = best_trial(trials, self.space.metrics[0])
        summary = {
            "studySpec": self.spec_payload,
            "maxTrialCount": self.max_trial_count,
            "parallelTrialCount": self.parallel,
            "maxFailedTrialCount": self.max_failed,
            "state": state,
            "stopReason": reason,
            "trialCounts": self._counts(),
            "bestTrialId": best["id"] if best else None,
            "updateTime": trials_lib.timestamp(),
        }
        tmp = self.study_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.study_path)

    def _ordered(self) -> list[dict[str, Any]]:
        return [self.trials[k] for k in sorted(self.trials, key=int)]

    def _counts(self) -> dict[str, int]:
        trials = self._ordered()
        return {
            "total": len(trials),
            "succeeded": sum(trials_lib.trial_state(t) == TrialState.SUCCEEDED for t in trials),
            "failed": sum(_counts_as_failed(t) for t in trials),
            "earlyStopped": sum(bool(_local(t).get("earlyStopped")) for t in trials),
            "running": sum(trials_lib.trial_state(t) == TrialState.ACTIVE for t in trials),
        }

    # --- optuna ------------------------------------------------------------------------------

    def _internal(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {k: to_internal(self.params_by_id[k], v) for k, v in params.items()}

    def _params(self, trial: Mapping[str, Any]) -> dict[str, Any]:
        raw = trials_lib.trial_parameters(trial)
        return {k: self.params_by_id[k].cast(v) for k, v in raw.items() if k in self.params_by_id}

    def _make_optuna_study(self, seed: int | None) -> Any:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        pruner: Any = optuna.pruners.NopPruner()
        if self.early_stopping:
            if len(self.space.metrics) > 1:
                raise StudyError("early stopping needs a single metric (the median rule is 1-D)")
            pruner = optuna.pruners.MedianPruner(
                n_startup_trials=self.early_stopping.min_trials,
                n_warmup_steps=self.early_stopping.warmup_steps,
            )
        # A resumed study must not replay the first run's random sequence.
        effective_seed = None if seed is None else seed + len(self.trials)
        study = optuna.create_study(
            directions=[str(m.goal) for m in self.space.metrics],  # type: ignore[misc]
            sampler=make_sampler(self.algorithm, effective_seed, self.max_trial_count),
            pruner=pruner,
        )
        for t in self._ordered():  # replay finished trials so the sampler learns from them
            state = trials_lib.trial_state(t)
            if state not in (TrialState.SUCCEEDED, TrialState.INFEASIBLE):
                continue
            params = self._internal(self._params(t))
            distributions = {k: distribution(self.params_by_id[k]) for k in params}
            intermediate = {
                int(m.get("stepCount", 0)): v
                for m in t.get("measurements", [])
                if (v := trials_lib.measurement_metrics(m).get(self.metric_ids[0])) is not None
            }
            values = [trials_lib.final_metric(t, m) for m in self.metric_ids]
            if _local(t).get("earlyStopped"):
                frozen_state, frozen_values = optuna.trial.TrialState.PRUNED, None
            elif state == TrialState.SUCCEEDED and all(v is not None for v in values):
                frozen_state, frozen_values = optuna.trial.TrialState.COMPLETE, values
            else:
                frozen_state, frozen_values = optuna.trial.TrialState.FAIL, None
            study.add_trial(
                optuna.trial.create_trial(
                    state=frozen_state,
                    values=frozen_values,  # type: ignore[arg-type]
                    params=params,
                    distributions=distributions,
                    intermediate_values=intermediate,
                )
            )
        return study

    # --- the loop ----------------------------------------------------------------------------

    def _next_grid_point(self) -> dict[str, Any] | None:
        assert self.grid is not None
        used = {json.dumps(self._params(t), sort_keys=True) for t in self.trials.values()}
        return next((p for p in self.grid if json.dumps(p, sort_keys=True) not in used), None)

    def _next_trial(self, interrupted: list[str]) -> tuple[dict[str, Any], Any] | None:
        """Create (or take back an interrupted) trial and its Optuna twin; None when done."""
        with self.lock:
            if interrupted:  # same id and parameters; the sampler gets them enqueued
                trial = self.trials[interrupted.pop(0)]
                self.optuna.enqueue_trial(self._internal(self._params(trial)))
                local = _local(trial)
                local["attempts"] = int(local.get("attempts", 1)) + 1
                trial[trials_lib.LOCAL_KEY] = local
                frozen = self.optuna.ask()
                suggest(frozen, self.space.parameters)
            else:
                if len(self.trials) >= self.max_trial_count:
                    return None
                if self.grid is not None:
                    point = self._next_grid_point()
                    if point is None:
                        return None
                    self.optuna.enqueue_trial(self._internal(point))
                trial_id = str(len(self.trials) + 1)
                trial = trials_lib.make_trial(
                    trial_id,
                    {},
                    state=TrialState.ACTIVE,
                    start_time=trials_lib.timestamp(),
                    local={"attempts": 1},
                )
                frozen = self.optuna.ask()
                params = suggest(frozen, self.space.parameters)
                trial["parameters"] = [{"parameterId": k, "value": v} for k, v in params.items()]
            self.trials[trial["id"]] = trial
            self._save()
            return trial, frozen

    def _trial_specs(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        flags = [f"--{k}={self.params_by_id[k].format_value(v)}" for k, v in params.items()]
        specs = json.loads(json.dumps(self.worker_pool_specs))
        for pool in specs:
            if "container_spec" in pool:
                pool["container_spec"]["args"] = (
                    list(pool["container_spec"].get("args", [])) + flags
                )
            elif "python_package_spec" in pool:
                package = pool["python_package_spec"]
                package["args"] = list(package.get("args", [])) + flags
        return specs

    def _run_trial(self, trial: Mapping[str, Any], frozen: Any) -> _Outcome:
        """Run one trial as a local custom job (in a worker thread)."""
        trial_id = trial["id"]
        local_dir = local_job.job_local_dir(self.base, trial_id)
        os.makedirs(local_dir, exist_ok=True)
        metric_file = os.path.join(local_dir, METRIC_FILE)
        if os.path.exists(metric_file):
            os.remove(metric_file)
        primary = self.metric_ids[0]
        reported: set[int] = set()
        early_stopped = False

        def on_tick() -> bool:
            nonlocal early_stopped
            if self.cancel.is_set():
                return True
            if not self.early_stopping:
                return False
            for m in read_measurements(metric_file, self.metric_ids):
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
                self._trial_specs(self._params(trial)),
                self.base,
                trial_id=trial_id,
                extra_env={"CLOUD_ML_TRIAL_ID": trial_id, "CLOUD_ML_HP_METRIC_FILE": metric_file},
                log_dir=local_dir,
                cwd=self.cwd,
                echo=None,
                timeout=self.trial_timeout,
                startup_timeout=TRIAL_STARTUP_TIMEOUT,
                on_tick=on_tick,
            )
            stopped = result.stopped
        except local_job.CustomJobError as err:
            error, stopped = err, False
        measurements = read_measurements(metric_file, self.metric_ids)
        final = select_measurement(measurements, self.space.metrics, self.selection)
        outcome = _Outcome(trial_id, TrialState.INFEASIBLE, measurements, final)
        chief_log = os.path.join(local_dir, "chief-0.log")
        if stopped and not early_stopped:
            outcome.cancelled = True
            outcome.reason = "cancelled: the study stopped while this trial ran"
        elif error is not None:
            outcome.reason = error.summary
            outcome.log_tail = error.log_tail
            outcome.exit_code = error.exit_code
        elif final is None or any(m not in final.metrics for m in self.metric_ids):
            seen = reported_tags(metric_file)
            outcome.reason = (
                f"reported no {'/'.join(self.metric_ids)} metric to {metric_file} "
                f"(metrics seen: {', '.join(seen) or 'none'})"
            )
            outcome.log_tail = local_job.tail(chief_log)
            outcome.exit_code = 0
        else:
            outcome.state = TrialState.SUCCEEDED
            outcome.early_stopped = early_stopped
            outcome.exit_code = None if early_stopped else 0
        return outcome

    def _finish(self, outcome: _Outcome, frozen: Any) -> dict[str, Any]:
        """Record a trial's outcome, tell the sampler, persist."""
        import optuna

        with self.lock:
            old = self.trials[outcome.trial_id]
            start = old.get("startTime")
            started = _parse_time(start) if start else None
            local_dir = local_job.job_local_dir(self.base, outcome.trial_id)
            succeeded = outcome.final is not None and outcome.state == TrialState.SUCCEEDED
            trial = trials_lib.make_trial(
                outcome.trial_id,
                trials_lib.trial_parameters(old),
                state=outcome.state,
                final_measurement=(
                    trials_lib.measurement(outcome.final.step, outcome.final.metrics)
                    if succeeded and outcome.final is not None
                    else None
                ),
                measurements=[
                    trials_lib.measurement(
                        m.step, m.metrics, m.timestamp - started if started else None
                    )
                    for m in outcome.measurements
                ],
                start_time=start,
                end_time=trials_lib.timestamp(),
                infeasible_reason=outcome.reason,
                local={
                    **_local(old),
                    "logPath": os.path.join(local_dir, "chief-0.log"),
                    "metricFile": os.path.join(local_dir, METRIC_FILE),
                    "exitCode": outcome.exit_code,
                    "earlyStopped": outcome.early_stopped,
                    "cancelled": outcome.cancelled,
                    "logTail": outcome.log_tail,
                },
            )
            self.trials[outcome.trial_id] = trial
            if outcome.early_stopped:
                self.optuna.tell(frozen, state=optuna.trial.TrialState.PRUNED)
            elif outcome.state == TrialState.SUCCEEDED:
                assert outcome.final is not None
                self.optuna.tell(frozen, [outcome.final.metrics[m] for m in self.metric_ids])
            else:
                self.optuna.tell(frozen, state=optuna.trial.TrialState.FAIL)
            self._save()
            return dict(trial)

    def stop_reason(self) -> str | None:
        """Why the failure rules stop the study now (None: they do not)."""
        trials = self._ordered()
        failed = [t for t in trials if _counts_as_failed(t)]
        succeeded = [t for t in trials if trials_lib.trial_state(t) == TrialState.SUCCEEDED]
        if self.max_failed == 0:
            first = self.trials.get("1")
            if first is not None and _counts_as_failed(first):
                return (
                    "the first trial failed, which points at the training code, so the study "
                    f"stopped (Vertex's rule): {first.get('infeasibleReason', '')}"
                )
            if len(failed) >= DEFAULT_FAILURE_FLOOR and len(failed) > len(succeeded):
                return (
                    f"{len(failed)} trials failed, more than succeeded ({len(succeeded)}); "
                    "set max_failed_trial_count to choose the limit"
                )
        elif len(failed) > self.max_failed:
            return (
                f"{len(failed)} trials failed, more than max_failed_trial_count="
                f"{self.max_failed}; last: {failed[-1].get('infeasibleReason', '')}"
            )
        return None

    def total(self) -> int:
        """Trials this study will run at most."""
        grid = len(self.grid) if self.grid is not None else self.max_trial_count
        return min(self.max_trial_count, grid)

    def run(self) -> list[dict[str, Any]]:
        """Run trials until done or stopped; return the trials."""
        reason = self.stop_reason()
        interrupted = [
            k
            for k in sorted(self.trials, key=int)
            if trials_lib.trial_state(self.trials[k]) == TrialState.ACTIVE
        ]
        self._start_progress()
        running: dict[concurrent.futures.Future[_Outcome], Any] = {}
        try:
            with concurrent.futures.ThreadPoolExecutor(self.parallel, "trial") as pool:
                try:
                    while True:
                        while reason is None and len(running) < self.parallel:
                            job = self._next_trial(interrupted)
                            if job is None:
                                break
                            running[pool.submit(self._run_trial, *job)] = job[1]
                            self._report(None)
                        if not running:
                            break
                        done, _ = concurrent.futures.wait(
                            running, return_when=concurrent.futures.FIRST_COMPLETED
                        )
                        for future in done:
                            frozen = running.pop(future)
                            self._report(self._finish(future.result(), frozen))
                            if reason is None:
                                reason = self.stop_reason()
                                if reason is not None:
                                    self.cancel.set()
                except BaseException:
                    self.cancel.set()  # running trials stop; they stay ACTIVE for a resume
                    raise
        finally:
            self._stop_progress()
        trials = self._ordered()
        if reason is not None:
            self._save("FAILED", reason)
            self._print(f"study stopped: {reason}")
            raise StudyError(f"study stopped: {reason}")
        done_reason = (
            f"all {len(self.grid)} grid points tried"
            if self.grid is not None and len(self.grid) <= len(trials)
            else f"max_trial_count={self.max_trial_count} reached"
        )
        self._save("SUCCEEDED", done_reason)
        self._print(self._summary(done_reason))
        return [dict(t) for t in trials]

    # --- progress ----------------------------------------------------------------------------

    def _snapshot(self, last: dict[str, Any] | None) -> StudyProgress:
        counts = self._counts()
        return StudyProgress(
            total=self.total(),
            done=counts["total"] - counts["running"],
            succeeded=counts["succeeded"],
            failed=counts["failed"],
            early_stopped=counts["earlyStopped"],
            running=counts["running"],
            best=best_trial(self._ordered(), self.space.metrics[0]),
            last=last,
        )

    def _describe(self, snap: StudyProgress) -> str:
        metric = self.space.metrics[0].metric_id
        best = (
            f"best {metric}={trials_lib.final_metric(snap.best, metric):.4g} "
            f"(trial {snap.best['id']})"
            if snap.best
            else "best: none yet"
        )
        return (
            f"trials {snap.done}/{snap.total} · {snap.running} running · "
            f"{snap.failed} failed · {best}"
        )

    def _trial_line(self, trial: Mapping[str, Any]) -> str:
        params = " ".join(
            f"{k}={self.params_by_id[k].format_value(v)}" for k, v in self._params(trial).items()
        )
        local = _local(trial)
        if trials_lib.trial_state(trial) == TrialState.SUCCEEDED:
            final = trial.get("finalMeasurement", {})
            metrics = " ".join(
                f"{k}={v:.4g}" for k, v in trials_lib.measurement_metrics(final).items()
            )
            status = "early-stopped" if local.get("earlyStopped") else "succeeded"
            return (
                f"trial {trial['id']} {status}: {metrics} (step {final.get('stepCount')}) {params}"
            )
        if local.get("cancelled"):
            return f"trial {trial['id']} cancelled {params}"
        return f"trial {trial['id']} failed: {trial.get('infeasibleReason', '')} {params}"

    def _summary(self, why: str) -> str:
        snap = self._snapshot(None)
        line = (
            f"study done ({why}): {snap.done} trials, {snap.succeeded} succeeded "
            f"({snap.early_stopped} early-stopped), {snap.failed} failed"
        )
        if snap.best:
            line += f"; best: {self._trial_line(snap.best)}"
        return line

    def _start_progress(self) -> None:
        if not self.show_progress:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True, soft_wrap=True)
        self.progress = Progress(
            TextColumn("[bold]HPT[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=self.console,
        )
        snap = self._snapshot(None)
        self.progress_task = self.progress.add_task(
            self._describe(snap), total=snap.total, completed=snap.done
        )
        self.progress.start()

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _print(self, line: str) -> None:
        if self.console is not None:
            self.console.print(line, markup=False, highlight=False)

    def _report(self, trial: dict[str, Any] | None) -> None:
        snap = self._snapshot(trial)
        if self.progress is not None:
            if trial is not None:
                self.progress.console.print(self._trial_line(trial), markup=False, highlight=False)
            self.progress.update(
                self.progress_task, description=self._describe(snap), completed=snap.done
            )
        if self.on_progress is not None:
            self.on_progress(snap)


def _parse_time(value: str) -> float:
    import datetime

    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _load_list(items: Sequence[Mapping[str, Any] | str]) -> list[dict[str, Any]]:
    return [json.loads(i) if isinstance(i, str) else dict(i) for i in items]


def run_study(
    *,
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    study_spec_metrics: Sequence[Mapping[str, Any] | str],
    study_spec_parameters: Sequence[Mapping[str, Any] | str],
    max_trial_count: int,
    parallel_trial_count: int,
    base_output_directory: str,
    max_failed_trial_count: int = 0,
    study_spec_algorithm: str = "ALGORITHM_UNSPECIFIED",
    study_spec_measurement_selection_type: str = "BEST_MEASUREMENT",
    early_stopping: bool | EarlyStopping = False,
    seed: int | None = None,
    trial_timeout: float | None = None,
    on_progress: Callable[[StudyProgress], None] | None = None,
    show_progress: bool = True,
    cwd: str | None = None,
) -> list[dict[str, Any]]:
    """Run an HPT study payload on this machine (see the module docstring for the rules).

    Args:
        worker_pool_specs: The trial job (`trial_worker_pool_specs`), as for Vertex.
        study_spec_metrics: `serialize_metrics(...)` output.
        study_spec_parameters: `serialize_parameters(...)` output.
        max_trial_count: Trials in total (failed ones included).
        parallel_trial_count: Trials at once.
        base_output_directory: Local directory; the study, its trials and logs live here.
        max_failed_trial_count: See the failure rules; 0 = the local stand-in for Vertex's.
        study_spec_algorithm: `ALGORITHM_UNSPECIFIED` (TPE), `GRID_SEARCH`, `RANDOM_SEARCH`.
        study_spec_measurement_selection_type: `BEST_MEASUREMENT` or `LAST_MEASUREMENT`.
        early_stopping: True (defaults) or an `EarlyStopping` to apply the median rule.
        seed: Sampler seed, for reproducible suggestions.
        trial_timeout: Seconds a trial may run before it is failed.
        on_progress: Called with a `StudyProgress` whenever a trial starts or ends.
        show_progress: Live Rich progress and one line per trial on stderr.
        cwd: Working directory of the trial processes (default: this one).

    Returns:
        The trials (`pipelines.trials` schema), also written to `<base>/trials.json`.

    Raises:
        SearchSpaceError, PayloadError: a bad payload, before anything runs.
        StudyError: the failure rules stopped the study, or the base holds another study.
    """
    from pipelines.worker_pools import validate_study_spec, validate_worker_pool_specs

    if "://" in base_output_directory:
        raise StudyError(
            f"base_output_directory={base_output_directory}: the local executor needs a local path"
        )
    counts = {
        "max_trial_count": (int(max_trial_count), 1),
        "parallel_trial_count": (int(parallel_trial_count), 1),
        "max_failed_trial_count": (int(max_failed_trial_count), 0),
    }
    for name, (value, least) in counts.items():
        if value < least:
            raise StudyError(f"{name}={value}: expected >= {least}")
    parameters, metrics = _load_list(study_spec_parameters), _load_list(study_spec_metrics)
    validate_study_spec(
        parameters, metrics, study_spec_algorithm, study_spec_measurement_selection_type
    )
    # Vertex's default for an unspecified selection is the best measurement.
    selection = (
        "LAST_MEASUREMENT"
        if study_spec_measurement_selection_type == "LAST_MEASUREMENT"
        else "BEST_MEASUREMENT"
    )
    pools = _load_list(worker_pool_specs)
    validate_worker_pool_specs(pools)
    space = from_study_spec(parameters, metrics)
    if isinstance(early_stopping, bool):
        early_stopping = EarlyStopping() if early_stopping else None  # type: ignore[assignment]
    study = _LocalStudy(
        space=space,
        spec_payload={
            "parameters": parameters,
            "metrics": metrics,
            "algorithm": study_spec_algorithm,
            "measurementSelectionType": selection,
        },
        worker_pool_specs=pools,
        base=os.path.abspath(base_output_directory),
        max_trial_count=counts["max_trial_count"][0],
        parallel_trial_count=min(counts["parallel_trial_count"][0], counts["max_trial_count"][0]),
        max_failed_trial_count=counts["max_failed_trial_count"][0],
        algorithm=study_spec_algorithm,
        selection=selection,
        early_stopping=early_stopping or None,  # type: ignore[arg-type]
        seed=seed,
        trial_timeout=trial_timeout,
        on_progress=on_progress,
        show_progress=show_progress,
        cwd=cwd,
    )
    return study.run()
