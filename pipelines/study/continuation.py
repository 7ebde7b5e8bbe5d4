"""Continue a study from an earlier run: the rules that let its trials join today's study.

An earlier run's trials (Vertex `Trial` JSON, as every target writes them) join today's
study only when they measured the same objectives, over parameters today's search space
still has. The rules, each applied one reported in one line (refusals: `ContinuationError`):

* objectives: the same (metric, goal) pairs, else refused; a trials file records no goals,
  so only its metrics are checked (and a note says so);
* removed parameter: a parameter of the earlier trials not in today's space is refused;
* added parameter: a parameter of today's space the earlier trials lack takes its default
  (the value the trainer ran them with);
* changed range: an earlier trial with a value outside today's range or values is dropped;
* unfinished: an earlier trial that is not SUCCEEDED or INFEASIBLE is dropped;
* budget (`check_budget`): a trial is compared only at equal budget. Other data or another
  image size is refused; fewer epochs than today's is refused; more epochs: each earlier
  trial is scored by its measurements up to today's epoch count (`at_budget`), as the final
  job retrains for today's; a source that records none of them (a trials file, a cloud run)
  is said in one line.

Origin: an earlier trial's id becomes `<label>:<id>` (`<label>` names the earlier run). The
id is a string in Vertex's `Trial`, so the list still parses strictly; ids stay unique in
the combined list (both runs number from 1); and the origin shows wherever an id does
(report, selection summary, model card, lineage) with no reader knowing a new key. A trial
already carrying a label (continued twice) keeps it. Selection ignores ids but for its last
tie-break, where a labelled id ranks after a numbered one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.study import trials as trials_lib
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState

ORIGIN_SEP = ":"
CONTINUED_KEY = "continuedFrom"  # in a trial's local extras: the run it came from
_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_FINISHED = (TrialState.SUCCEEDED, TrialState.INFEASIBLE)

Objective = tuple[str, str]  # (metric id, goal: maximize | minimize)
# What a trial's score depends on beside its parameters (a local run records them in its
# study's identity.json): compared between the runs by `check_budget`. `trial_workers` sets
# each trial's global batch (batch_size per replica), and so the learning rate that scores well.
BUDGET_KEYS = ("dataset", "image_size", "epochs", "trial_workers")


class ContinuationError(ValueError):
    """Earlier trials that cannot continue today's study; one line."""


@dataclasses.dataclass(frozen=True)
class Earlier:
    """An earlier run's trials as read, before the rules.

    Attributes:
        source: What the user named (`continue_from`).
        label: Short name of the run, the prefix of its trials' ids.
        trials: Its trials (states as ints).
        objectives: Its (metric, goal) pairs; None when the source records none (a file).
        budget: What its trials ran with (`BUDGET_KEYS`: epochs, image size, the dataset's
            fingerprint); None when the source records none (a file, a cloud run).
    """

    source: str
    label: str
    trials: list[dict[str, Any]]
    objectives: list[Objective] | None
    budget: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Continued:
    """Earlier trials fit to join today's study, and one line per rule applied."""

    source: str
    trials: list[dict[str, Any]]
    notes: list[str]


def label_of(name: str) -> str:
    """A short id-safe name for a run (`runs/first` → `first`, a resource → its id)."""
    tail = name.rstrip("/").rsplit("/", 1)[-1]
    tail = tail.removesuffix(".json")
    return _LABEL.sub("-", tail).strip("-") or "earlier"


def origin(trial: Mapping[str, Any]) -> str:
    """The label of the run a trial came from; empty for a trial of this run."""
    tid = str(trial.get("id", ""))
    return tid.rsplit(ORIGIN_SEP, 1)[0] if ORIGIN_SEP in tid else ""


def _goals(objectives: Sequence[Objective]) -> str:
    return ", ".join(f"{m} {g}" for m, g in objectives)


def check_objectives(earlier: Earlier, today: Sequence[Objective]) -> list[str]:
    """Refuse other objectives; return the note for a source that records no goals."""
    if earlier.objectives is not None:
        if sorted(earlier.objectives) != sorted(today):
            raise ContinuationError(
                f"continue_from={earlier.source}: its objectives ({_goals(earlier.objectives)}) "
                f"differ from today's ({_goals(today)}); a study continues only with the same "
                "metrics and goals"
            )
        return []
    reported = {
        m for t in earlier.trials for m in trials_lib.measurement_metrics(t.get("finalMeasurement"))
    }
    missing = [m for m, _ in today if m not in reported]
    if missing:
        raise ContinuationError(
            f"continue_from={earlier.source}: its trials report no {missing[0]!r} (today's "
            f"objective); expected trials of the same metrics"
        )
    return [
        f"objectives: {earlier.source} records no goals (a trials file); its trials are "
        f"read as {_goals(today)}"
    ]


def _inside(p: Parameter, value: Any) -> bool:
    if value is None:
        return False
    if p.type == "categorical":
        return str(value) in [str(v) for v in p.values]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    if not math.isfinite(number):
        return False
    if p.type == "discrete":
        return any(math.isclose(number, float(v), rel_tol=1e-9) for v in p.values)
    if p.type == "integer" and not number.is_integer():
        return False
    return float(p.min) <= number <= float(p.max)  # type: ignore[arg-type]


def _fill(
    parameters: Sequence[Parameter],
    values: Mapping[str, Any],
    defaults: Mapping[str, Any],
    added: dict[str, Any],
) -> dict[str, Any] | None:
    """Today's active parameters for `values` (missing ones from `defaults`); None: outside."""
    out: dict[str, Any] = {}
    for p in parameters:
        pid = p.parameter_id
        if pid in values:
            value = values[pid]
        elif pid in defaults:
            value = added[pid] = defaults[pid]
        else:
            raise ContinuationError(
                f"parameter {pid!r} is new in today's search space and has no default to give "
                "the earlier trials; expected a trainer flag with a default"
            )
        if not _inside(p, value):
            return None
        out[pid] = p.cast(value)
        below = _fill(p.active_children(out[pid]), values, defaults, added)
        if below is None:
            return None
        out.update(below)
    return out


def check_budget(earlier: Earlier, budget: Mapping[str, Any]) -> tuple[int | None, list[str]]:
    """Compare what the earlier trials ran with to today's `budget` (`BUDGET_KEYS`).

    Returns:
        (the epoch count to score the earlier trials at, or None: as they are; the notes).

    Raises:
        ContinuationError: Other data, another image size, other workers per trial, or
            fewer epochs than today's.
    """
    src, old = earlier.source, earlier.budget
    if old is None:
        known = ", ".join(f"{k}={budget[k]}" for k in BUDGET_KEYS[1:] if budget.get(k) is not None)
        return None, [
            f"budget: {src} records no epochs, image size or dataset (a trials file or a cloud "
            f"run); its trials are compared as if they ran with today's {known}"
        ]
    differ = {
        k: (old[k], budget[k]) for k in BUDGET_KEYS if None not in (old.get(k), budget.get(k))
    }
    differ = {k: pair for k, pair in differ.items() if pair[0] != pair[1]}
    if "dataset" in differ:
        raise ContinuationError(
            f"continue_from={src}: its trials were measured on other data (dataset "
            f"{differ['dataset'][0]!r}, today's {differ['dataset'][1]!r}); a study continues only "
            "on the same data: start a new study (without --continue-from)"
        )
    if "image_size" in differ:
        was, now = differ["image_size"]
        raise ContinuationError(
            f"continue_from={src}: its trials ran at image_size={was}, today's is {now}; a study "
            f"continues only at the same image size: pass --image-size {was}, or start a new study"
        )
    if "trial_workers" in differ:
        was, now = differ["trial_workers"]
        raise ContinuationError(
            f"continue_from={src}: its trials ran with trial_workers={was}, today's is {now}; a "
            "trial's global batch (and the learning rate that suits it) grows with its replicas: "
            f"pass --trial-workers {was}, or start a new study"
        )
    if "epochs" not in differ:
        return None, []
    was, now = (int(n) for n in differ["epochs"])
    if was < now:
        raise ContinuationError(
            f"continue_from={src}: its trials ran epochs={was}, today's is {now}; a trial is "
            f"compared only at equal budget and its scores stop at epoch {was}: pass --epochs "
            f"{was}, or start a new study"
        )
    return now, [
        f"rule budget: its trials ran epochs={was}, today's is {now}; each is scored by its "
        f"measurements up to epoch {now}, as the final job retrains for {now}"
    ]


def at_budget(
    trial: Mapping[str, Any], epochs: int, primary: Objective, selection: str
) -> dict[str, Any] | None:
    """`trial` as if it had run `epochs`: its measurements up to then, its final chosen again.

    The final measurement is the best (or, `LAST_MEASUREMENT`, the last) of those steps on the
    primary metric, with the metrics measured once (its cost) kept. Only a SUCCEEDED trial is
    rescored (a failed or diverged one stays as it was). None: no measurement that early.
    """
    if trials_lib.trial_state(trial) != TrialState.SUCCEEDED:
        return dict(trial)
    every = trial.get("measurements", [])
    steps = [m for m in every if int(m.get("stepCount", 0)) <= epochs]
    scored = [m for m in steps if primary[0] in trials_lib.measurement_metrics(m)]
    if not scored:
        return None
    sign = 1.0 if primary[1] == "maximize" else -1.0
    chosen = (
        scored[-1]
        if selection == "LAST_MEASUREMENT"
        else max(
            scored,
            key=lambda m: (
                sign * trials_lib.measurement_metrics(m)[primary[0]],
                -int(m.get("stepCount", 0)),
            ),
        )
    )
    once = trials_lib.measured_once([trials_lib.measurement_metrics(m) for m in every])
    metrics = {**once, **trials_lib.measurement_metrics(chosen)}
    final = {
        "stepCount": chosen.get("stepCount"),
        "metrics": [{"metricId": k, "value": v} for k, v in metrics.items()],
    }
    return {**trial, "measurements": steps, "finalMeasurement": final}


def reconcile(
    earlier: Earlier,
    space: SearchSpace,
    today: Sequence[Objective],
    defaults: Mapping[str, Any],
    *,
    budget: Mapping[str, Any] | None = None,
    selection: str = "BEST_MEASUREMENT",
) -> Continued:
    """Apply the module's rules to `earlier`'s trials for today's `space` and objectives.

    Args:
        earlier: The earlier run, as read.
        space: Today's search space.
        today: Today's (metric, goal) pairs.
        defaults: Each parameter's default (the value a trial that lacks it ran with).
        budget: Today's `BUDGET_KEYS` (a None value, or no `budget`: not compared).
        selection: Today's measurement selection (`at_budget` chooses the final with it).

    Raises:
        ContinuationError: Other objectives, a removed parameter, other data, image size or
            fewer epochs, or no trial left.
    """
    notes = check_objectives(earlier, today)
    epochs, said = check_budget(earlier, budget) if budget is not None else (None, [])
    notes.extend(said)
    known = {p.parameter_id for p in space.all_parameters()}
    removed = sorted({k for t in earlier.trials for k in trials_lib.trial_parameters(t)} - known)
    if removed:
        raise ContinuationError(
            f"continue_from={earlier.source}: parameter(s) {', '.join(removed)} of its trials "
            "are not in today's search space (removed since); keep them in the space, or "
            "start a new study"
        )
    sorted_trials = _Sorted()
    for trial in earlier.trials:
        scored = trial if epochs is None else at_budget(trial, epochs, today[0], selection)
        if scored is None:
            sorted_trials.unscored.append(str(trial["id"]))
            continue
        sorted_trials.add(scored, earlier, space, defaults)
    notes.extend(sorted_trials.notes())
    kept = sorted_trials.kept
    if not kept:
        raise ContinuationError(
            f"continue_from={earlier.source}: none of its {len(earlier.trials)} trial(s) fits "
            "today's study; nothing to continue from"
        )
    succeeded = sum(trials_lib.trial_state(t) == TrialState.SUCCEEDED for t in kept)
    notes.append(
        f"continuing from {earlier.source}: {len(kept)} earlier trial(s) ({succeeded} "
        f"succeeded) join the study as {earlier.label}{ORIGIN_SEP}<id>"
    )
    return Continued(earlier.source, kept, notes)


def _relabel(
    trial: Mapping[str, Any], params: Mapping[str, Any], earlier: Earlier
) -> dict[str, Any]:
    """The trial as today's study sees it: labelled id, full parameters, lean local extras."""
    tid = str(trial["id"])
    out = {k: v for k, v in trial.items() if k != trials_lib.LOCAL_KEY}
    out["id"] = tid if ORIGIN_SEP in tid else f"{earlier.label}{ORIGIN_SEP}{tid}"
    out["parameters"] = [{"parameterId": k, "value": v} for k, v in params.items()]
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    extras: dict[str, Any] = {CONTINUED_KEY: local.get(CONTINUED_KEY) or earlier.source}
    for key in ("earlyStopped", "precision", "rung"):  # replayed as pruned; shown in the report
        if local.get(key):
            extras[key] = local[key]
    out[trials_lib.LOCAL_KEY] = extras
    return out


def combine(
    continued: Iterable[Mapping[str, Any]], trials: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Earlier trials, then `trials`; an earlier trial `trials` already holds is not repeated.

    The local tune step already folds the earlier trials into its artifact (its study was
    seeded with them); the cloud tune steps' artifacts hold only the service's trials.
    """
    own = [dict(t) for t in trials]
    ids = {str(t.get("id")) for t in own}
    return [_as_read(t) for t in continued if str(t.get("id")) not in ids] + own


def _as_read(trial: Mapping[str, Any]) -> dict[str, Any]:
    """A trial that came through a pipeline parameter, as read from a file.

    kfp hands numbers inside lists over as floats: the state becomes its enum int again,
    and an integral parameter value (`128.0`) an int, as the trial wrote it.
    """
    out = trials_lib.normalize_trial(trial)
    out["parameters"] = [
        {**p, "value": int(v)} if isinstance(v := p.get("value"), float) and v.is_integer() else p
        for p in trial.get("parameters", [])
    ]
    return out


def sources(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """The earlier runs the trials came from, in order of first appearance."""
    found: list[str] = []
    for t in trials:
        source = (t.get(trials_lib.LOCAL_KEY) or {}).get(CONTINUED_KEY)
        if source and source not in found:
            found.append(source)
    return found


def config_key(params: Mapping[str, Any]) -> str:
    """A configuration as a comparable key (parameters cast to their types first)."""
    return json.dumps(dict(params), sort_keys=True)


@dataclasses.dataclass
class _Sorted:
    """The earlier trials sorted by the rules: kept (relabelled), or dropped and why."""

    kept: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    outside: list[str] = dataclasses.field(default_factory=list)
    unfinished: list[str] = dataclasses.field(default_factory=list)
    unscored: list[str] = dataclasses.field(default_factory=list)  # no measurement by the budget
    added_count: dict[str, int] = dataclasses.field(default_factory=dict)
    added_value: dict[str, Any] = dataclasses.field(default_factory=dict)

    def add(
        self, trial: Mapping[str, Any], earlier: Earlier, space: SearchSpace, defaults: Any
    ) -> None:
        """Keep `trial` (its new parameters at their defaults) or record why it is dropped."""
        tid = str(trial["id"])
        if trials_lib.trial_state(trial) not in _FINISHED:
            self.unfinished.append(tid)
            return
        values = trials_lib.trial_parameters(trial)
        added: dict[str, Any] = {}
        try:
            full = _fill(space.parameters, values, defaults, added)
        except ContinuationError as err:
            raise ContinuationError(f"continue_from={earlier.source}: {err}") from None
        if full is None or set(values) - set(full):  # outside, or a child no longer active
            self.outside.append(tid)
            return
        for name, value in added.items():
            self.added_count[name] = self.added_count.get(name, 0) + 1
            self.added_value[name] = value
        self.kept.append(_relabel(trial, full, earlier))

    def notes(self) -> list[str]:
        """One line per rule that applied: added parameters, changed ranges, unfinished."""
        notes = [
            f"rule added parameter: {name} is new since; {self.added_count[name]} earlier "
            f"trial(s) take its default {self.added_value[name]!r}"
            for name in sorted(self.added_count)
        ]
        if self.outside:
            notes.append(
                f"rule changed range: {len(self.outside)} earlier trial(s) outside today's "
                f"search space dropped ({', '.join(self.outside)})"
            )
        if self.unscored:
            notes.append(
                f"rule budget: {len(self.unscored)} earlier trial(s) with no measurement by "
                f"today's epochs dropped ({', '.join(self.unscored)})"
            )
        if self.unfinished:
            notes.append(
                f"rule unfinished: {len(self.unfinished)} earlier trial(s) not finished dropped "
                f"({', '.join(self.unfinished)})"
            )
        return notes
