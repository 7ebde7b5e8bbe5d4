"""Run a Vertex HPT study payload on this machine: Optuna suggests, `local_job` runs each trial.

`run_study` takes exactly what GCPC's `HyperparameterTuningJobRunOp` takes, plus local
options, and does what Vertex does with it, so the local target is a stand-in for the
service: Vertex's algorithms mapped onto Optuna (`sampler`), each trial a local custom job
with Vertex's environment, its metric read from the hypertune file, Vertex's failure rules
(`failure_rules`) and median early stopping. The study lives in `<base>/trials.json` and
`<base>/study.json`, so a rerun resumes it and never reruns a finished trial; a study the
failure rules stopped stays stopped. The rules in full: docs/local-run.md.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines import ownership
from pipelines.jobs import fork_client, local_job
from pipelines.study import (
    continuation,
    failure_rules,
    interruption,
    optuna_study,
    progress_lines,
    spec_reader,
    trial_runner,
)
from pipelines.study import trials as trials_lib
from pipelines.study.budgets import Budgets
from pipelines.study.halving import Rungs, halving_line, pruned_at, saving_line
from pipelines.study.measurements import best_trial
from pipelines.study.optuna_study import EarlyStopping
from pipelines.study.progress_lines import StudyProgress
from pipelines.study.sampler import grid_points, suggest
from pipelines.study.study_plan import StudyError, StudyPlan, checked_payload, halving_plan
from pipelines.study.trials import TrialState

STUDY_FILE = "study.json"
LOCK_FILE = "study.lock"  # held while the study runs trials (`pipelines.ownership`)
LOCK_WAIT_S = 30.0  # for the study of an interrupted run to let go
METRIC_FILE = trial_runner.METRIC_FILE


class StudyInterrupted(StudyError):
    """The run was interrupted: running trials are kept to rerun on resume."""


def _local(trial: Mapping[str, Any]) -> dict[str, Any]:
    return dict(trial.get(trials_lib.LOCAL_KEY) or {})


class _LocalStudy:
    """State and loop of one study (see `run_study`)."""

    def __init__(self, plan: StudyPlan):
        self.plan = plan
        space = plan.space
        self.fork_server: fork_client.ForkServer | None = None
        self.metric_ids = [m.metric_id for m in space.metrics]
        self.params_by_id = {p.parameter_id: p for p in space.all_parameters()}
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.watch = interruption.RunWatch(self.cancel.set)
        self.trials: dict[str, dict[str, Any]] = {}
        self.grid = grid_points(space.parameters) if plan.algorithm == "GRID_SEARCH" else None
        self.exhausted = False  # every configuration the sampler could draw is taken
        self.halt: str | None = None  # our side stopped the study (a full disk…)
        self.budget: str | None = None  # the budget that ended the study (`budgets`)
        self.started = time.monotonic()
        self.trials_path = os.path.join(plan.base, trials_lib.TRIALS_FILE)
        self.study_path = os.path.join(plan.base, STUDY_FILE)
        self._load()
        # The continued run's trials (`continuation`): the sampler learns from them and never
        # proposes them again; not this study's (ids, counts and resume ignore them).
        self.earlier = [dict(t) for t in plan.earlier]
        if plan.early_stopping and len(space.metrics) > 1:
            raise StudyError("early stopping needs a single metric (the median rule is 1-D)")
        if plan.early_stopping and plan.halving:
            raise StudyError(f"early_stopping (median) and {plan.halving.kind}: choose one")
        self.optuna = optuna_study.make_optuna_study(
            space,
            [*self.earlier, *self._ordered()],
            algorithm=plan.algorithm,
            seed=plan.seed,
            max_trial_count=plan.max_trial_count,
            early_stopping=plan.early_stopping,
        )
        self.rungs = Rungs(plan.halving, self._ordered()) if plan.halving else None
        self.view = progress_lines.ProgressView(
            enabled=plan.show_progress, metric=space.metrics[0].metric_id
        )

    # --- persistence -------------------------------------------------------------------------

    def _load(self) -> None:
        if os.path.exists(self.study_path):
            with open(self.study_path, encoding="utf-8") as f:
                saved = json.load(f)
            plan = self.plan
            same = spec_reader.same_study(
                saved.get("studySpec", {}), plan.space, plan.algorithm, plan.selection
            )
            if not same:
                raise StudyError(
                    f"{self.plan.base} already holds a different study (parameters, metrics, "
                    "algorithm or measurement selection differ); use another base_output_directory"
                )
        if os.path.exists(self.trials_path):
            for t in trials_lib.read_trials(self.trials_path):
                self.trials[t["id"]] = t
        for trial_id, t in list(self.trials.items()):  # finished, but stopped before recorded
            if trials_lib.trial_state(t) != TrialState.ACTIVE:
                continue
            kept = trial_runner.load_outcome(local_job.job_local_dir(self.plan.base, trial_id))
            if kept is not None and (kept.state == TrialState.SUCCEEDED or kept.diverged):
                self.trials[trial_id] = self._record(kept, recovered=True)

    def _save(self, state: str = "ACTIVE", reason: str = "") -> None:
        trials = self._ordered()
        trials_lib.write_trials(self.trials_path, trials)
        best = self._best()
        summary = {
            "studySpec": self.plan.spec_payload,
            "maxTrialCount": self.plan.max_trial_count,
            "parallelTrialCount": self.plan.parallel,
            "maxFailedTrialCount": self.plan.max_failed,
            "state": state,
            "stopReason": reason,
            "trialCounts": self._counts(),
            "bestTrialId": best["id"] if best else None,
            "updateTime": trials_lib.timestamp(),
        }
        tmp = self.study_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(summary, indent=2) + "\n")
        os.replace(tmp, self.study_path)

    def _ordered(self) -> list[dict[str, Any]]:
        return [self.trials[k] for k in sorted(self.trials, key=int)]

    def _best(self) -> dict[str, Any] | None:
        """The best trial selection may pick (none stopped below the top rung, none diverged)."""
        eligible = [
            t for t in self._ordered() if pruned_at(t) is None and not trials_lib.is_diverged(t)
        ]
        return best_trial(eligible, self.plan.space.metrics[0])

    def _counts(self) -> dict[str, int]:
        return progress_lines.counts(self._ordered())

    # --- optuna ------------------------------------------------------------------------------

    def _internal(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return optuna_study.internal_params(params, self.params_by_id)

    def _params(self, trial: Mapping[str, Any]) -> dict[str, Any]:
        return optuna_study.trial_params(trial, self.params_by_id)

    # --- the loop ----------------------------------------------------------------------------

    def _next_grid_point(self) -> dict[str, Any] | None:
        assert self.grid is not None
        used = {json.dumps(self._params(t), sort_keys=True) for t in self.trials.values()}
        used |= self._measured()
        return next((p for p in self.grid if json.dumps(p, sort_keys=True) not in used), None)

    def _measured(self) -> set[str]:
        """Configurations measured or being measured: the earlier run's and this study's."""
        return {
            continuation.config_key(self._params(t)) for t in [*self.earlier, *self.trials.values()]
        }

    def _next_trial(self, interrupted: list[str]) -> tuple[dict[str, Any], Any] | None:
        """Create (or take back an interrupted) trial and its Optuna twin; None when done."""
        with self.lock:
            if interrupted:  # same id and parameters; the sampler gets them enqueued
                trial = self.trials[interrupted.pop(0)]
                self.optuna.enqueue_trial(self._internal(self._params(trial)))
                local = _local(trial)
                local["attempts"] = int(local.get("attempts", 1)) + 1
                local["rerunAfter"] = local.pop("interrupted", "")
                trial[trials_lib.LOCAL_KEY] = local
                frozen = self.optuna.ask()
                suggest(frozen, self.plan.space.parameters)
            else:
                if len(self.trials) >= self.plan.max_trial_count:
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
                drawn = optuna_study.ask_new(
                    self.optuna, self.plan.space.parameters, self._measured()
                )
                if drawn is None:
                    self.exhausted = True
                    return None
                frozen, params = drawn
                trial["parameters"] = [{"parameterId": k, "value": v} for k, v in params.items()]
            self.trials[trial["id"]] = trial
            self._save()
            return trial, frozen

    def _finish(self, outcome: trial_runner.Outcome, frozen: Any) -> dict[str, Any]:
        """Record a trial's outcome, tell the sampler, persist."""
        import optuna

        if outcome.state != TrialState.SUCCEEDED and (outcome.cancelled or outcome.ours):
            if outcome.ours and self.halt is None:
                self.halt = f"trial {outcome.trial_id}: {outcome.ours}"
            why = outcome.ours or (
                self.watch.why
                if self.watch.interrupted.is_set()
                else self.budget or "the study stopped it"
            )
            return self._interrupted(outcome.trial_id, frozen, why)
        if outcome.state != TrialState.SUCCEEDED and self.watch.stopped_by_run(outcome.exit_code):
            return self._interrupted(outcome.trial_id, frozen)
        if self.rungs is not None and outcome.rung is None:  # its rung values count for others
            primary = self.metric_ids[0]
            self.rungs.judge(
                outcome.trial_id,
                {m.step: m.metrics[primary] for m in outcome.measurements if primary in m.metrics},
            )
        with self.lock:
            trial = self._record(outcome)
            self.trials[outcome.trial_id] = trial
            if outcome.early_stopped:
                self.optuna.tell(frozen, state=optuna.trial.TrialState.PRUNED)
            elif outcome.state == TrialState.SUCCEEDED or outcome.diverged:  # diverged: worst
                assert outcome.final is not None
                self.optuna.tell(frozen, [outcome.final.metrics[m] for m in self.metric_ids])
            else:
                self.optuna.tell(frozen, state=optuna.trial.TrialState.FAIL)
            self._save()
            return dict(trial)

    def _record(self, outcome: trial_runner.Outcome, *, recovered: bool = False) -> dict[str, Any]:
        """The trial's record for `outcome` (`recovered`: read back from its durable outcome)."""
        local_dir = local_job.job_local_dir(self.plan.base, outcome.trial_id)
        return trial_runner.record(self.trials[outcome.trial_id], outcome, local_dir, recovered)

    def _interrupted(self, trial_id: str, frozen: Any, why: str | None = None) -> dict[str, Any]:
        """Keep a trial our side stopped (`why`; default: the run's interruption) to rerun."""
        import optuna

        with self.lock:
            trial = self.trials[trial_id]
            trial[trials_lib.LOCAL_KEY] = {
                **_local(trial),
                "interrupted": why or self.watch.why,
            }
            self.optuna.tell(frozen, state=optuna.trial.TrialState.FAIL)  # this process only
            self._save()
            return dict(trial)

    def stop_reason(self) -> str | None:
        """Why the failure rules stop the study now (None: they do not)."""
        return failure_rules.stop_reason(self._ordered(), self.plan.max_failed)

    def total(self) -> int:
        """Trials this study will run at most."""
        grid = len(self.grid) if self.grid is not None else self.plan.max_trial_count
        return min(self.plan.max_trial_count, grid)

    def run(self) -> list[dict[str, Any]]:
        """Run trials until done or stopped; return the trials."""
        reason = self.stop_reason()
        active = [
            k for k, t in self.trials.items() if trials_lib.trial_state(t) == TrialState.ACTIVE
        ]
        interrupted = sorted(active, key=int)
        self.view.start(self._snapshot(None))
        if self.plan.halving is not None:
            self.view.print(halving_line(self.plan.halving, len(self.metric_ids)))
        running: dict[concurrent.futures.Future[trial_runner.Outcome], Any] = {}
        try:
            with (
                ownership.owned(
                    os.path.join(self.plan.base, LOCK_FILE),
                    f"the study in {self.plan.base}",
                    LOCK_WAIT_S,
                ),
                self.watch.watching(),
                trial_runner.fork_session(self) as self.fork_server,
                concurrent.futures.ThreadPoolExecutor(self.plan.parallel, "trial") as pool,
            ):
                try:
                    while True:
                        while (
                            reason is None
                            and self.budget is None
                            and not self.cancel.is_set()
                            and len(running) < self.plan.parallel
                        ):
                            job = self._next_trial(interrupted)
                            if job is None:
                                break
                            running[pool.submit(trial_runner.run_trial, self, *job)] = job[1]
                            self._report(None)
                        if not running:
                            break
                        done, _ = concurrent.futures.wait(
                            running,
                            timeout=self.plan.budgets.time_left(time.monotonic() - self.started),
                            return_when=concurrent.futures.FIRST_COMPLETED,
                        )
                        for future in done:
                            frozen = running.pop(future)
                            self._report(self._finish(future.result(), frozen))
                            if reason is None:
                                reason = self.halt or self.stop_reason()
                                if reason is not None:
                                    self.cancel.set()
                        self._check_budgets()
                except BaseException as err:
                    self.cancel.set()  # running trials stop; they stay ACTIVE for a resume
                    if isinstance(err, KeyboardInterrupt):  # Ctrl-C, or a stop signal's
                        self.watch.interrupt("the run got SIGINT")  # a signal's reason stays
                        self._record_stopped(running)
                    raise
        finally:
            self.view.stop()
        return self._conclude(reason)

    def _check_budgets(self) -> None:
        """Note a budget spent; the wall clock's also stops the running trials (not failed)."""
        if self.budget is None:
            metric = self.plan.space.metrics[0]
            self.budget = self.plan.budgets.spent(
                self._ordered(), metric, time.monotonic() - self.started
            )
            if (self.budget or "").startswith("max_study_hours"):
                self.cancel.set()

    def _record_stopped(self, running: Mapping[concurrent.futures.Future[Any], Any]) -> None:
        """Record each running trial as it stops (interrupted: rerun on resume), and why."""
        for future, frozen in running.items():
            with contextlib.suppress(Exception):  # a trial that broke stays ACTIVE: rerun too
                self._finish(future.result(), frozen)
        self._save("ACTIVE", f"interrupted: {self.watch.why}")

    def _conclude(self, reason: str | None) -> list[dict[str, Any]]:
        """Save how the loop ended (`reason`: what stopped it); the trials, or raise why not."""
        trials = self._ordered()
        if self.watch.interrupted.is_set():
            self._save("ACTIVE", f"interrupted: {self.watch.why}")
            raise StudyInterrupted(f"interrupted: {self.watch.why}; rerun to resume")
        if reason is not None:
            self._save("FAILED", reason)
            self.view.print(f"study stopped: {reason}")
            raise StudyError(f"study stopped: {reason}")
        done_reason = self.budget or self._done_reason(len(trials))
        self._save("SUCCEEDED", done_reason)
        self.view.print(self._summary(done_reason))
        return [dict(t) for t in trials]

    def _done_reason(self, trial_count: int) -> str:
        """Why a study that ran out of work (not stopped) is done."""
        if self.grid is not None and len(self.grid) <= trial_count:
            return f"all {len(self.grid)} grid points tried"
        if self.exhausted:
            return f"no configuration left untried after {optuna_study.MAX_REPEATS} draws"
        return f"max_trial_count={self.plan.max_trial_count} reached"

    # --- progress ----------------------------------------------------------------------------

    def _snapshot(self, last: dict[str, Any] | None) -> StudyProgress:
        counts = self._counts()
        return StudyProgress(
            total=self.total(),
            done=counts["total"] - counts["running"] - counts["interrupted"],
            succeeded=counts["succeeded"],
            failed=counts["failed"],
            early_stopped=counts["earlyStopped"],
            running=counts["running"],
            interrupted=counts["interrupted"],
            diverged=counts["diverged"],
            best=self._best(),
            last=last,
        )

    def _summary(self, why: str) -> str:
        line = progress_lines.summary(self._snapshot(None), why)
        if self.plan.halving is None:
            return line
        finished = [t for t in self._ordered() if trials_lib.trial_state(t) != TrialState.ACTIVE]
        return f"{line}; {saving_line(self.plan.halving, finished)}"

    def _report(self, trial: dict[str, Any] | None) -> None:
        snap = self._snapshot(trial)
        self.view.update(snap, trial)
        if self.plan.on_progress is not None:
            self.plan.on_progress(snap)


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
    scheduler: str = "none",
    rungs: tuple[int, int, int] = (1, 3, 0),
    max_study_hours: float = 0.0,
    max_trials_no_progress: int = 0,
    seed: int | None = None,
    trial_timeout: float | None = None,
    on_progress: Callable[[StudyProgress], None] | None = None,
    show_progress: bool = True,
    cwd: str | None = None,
    earlier_trials: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Run an HPT study payload on this machine (the rules: the module docstring).

    The Vertex HPT job's payload fields (their names: a payload passes as `**payload`), then
    the local run's own; that list makes this function long, its body is a few lines.

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
        scheduler: none, median (= `early_stopping`), asha or hyperband (`halving`).
        rungs: Successive halving's (min_epochs, reduction_factor, epochs): the first rung,
            η, and the top rung (the trial job's epochs).
        max_study_hours: Wall-clock hours of the study (0: no limit; `budgets`).
        max_trials_no_progress: Finished trials in a row without a better best (0: no limit).
        seed: Sampler seed, for reproducible suggestions.
        trial_timeout: Seconds a trial may run before it is failed.
        on_progress: Called with a `StudyProgress` whenever a trial starts or ends.
        show_progress: Live Rich progress and one line per trial on stderr.
        cwd: Working directory of the trial processes (default: this one).
        earlier_trials: Trials of the run this study continues (`continuation.reconcile`d):
            the sampler starts from them and proposes none of their configurations again.

    Returns:
        The trials (`pipelines.study.trials` schema), also written to `<base>/trials.json`.

    Raises:
        SearchSpaceError, PayloadError: a bad payload, before anything runs.
        StudyError: the failure rules stopped the study, or the base holds another study.
    """
    if "://" in base_output_directory:
        raise StudyError(
            f"base_output_directory={base_output_directory}: the local executor needs a local path"
        )
    payload = checked_payload(
        worker_pool_specs,
        study_spec_metrics,
        study_spec_parameters,
        study_spec_algorithm,
        study_spec_measurement_selection_type,
        (max_trial_count, parallel_trial_count, max_failed_trial_count),
    )
    if isinstance(early_stopping, bool):
        median = early_stopping or scheduler == "median"
        early_stopping = EarlyStopping() if median else None  # type: ignore[assignment]
    halving = halving_plan(scheduler, rungs, payload["space"].metrics[0])
    plan = StudyPlan(
        **payload,
        base=os.path.abspath(base_output_directory),
        early_stopping=early_stopping or None,  # type: ignore[arg-type]
        halving=halving,
        budgets=Budgets(float(max_study_hours or 0), int(max_trials_no_progress or 0)),
        seed=seed,
        trial_timeout=trial_timeout,
        on_progress=on_progress,
        show_progress=show_progress,
        cwd=cwd,
        earlier=earlier_trials,
    )
    return _LocalStudy(plan).run()
