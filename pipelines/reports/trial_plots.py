"""The trial report's plots: the metric per trial, against each parameter, and per epoch.

Parameters are drawn on the axis their type calls for: discrete and categorical ones
(and integer ones with few values) on a categorical axis, one tick per value; doubles on a
numeric axis, logarithmic when they span orders of magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.reports import plotting
from pipelines.study import continuation
from pipelines.study import trials as trials_lib
from pipelines.study.search_space import Metric
from pipelines.study.selection import rank_key

MAX_TICKS = 30  # trials labelled one by one on the x axis up to this many
LOG_SPAN = 100.0  # a positive parameter whose max/min reaches this is plotted on a log axis
MAX_CATEGORIES = 12  # integral values of a parameter of unknown type: categories up to this many


def id_key(trial_id: str) -> tuple[float, str]:
    """Sort key of a trial id: numeric ids in numeric order, then the others."""
    return (int(trial_id) if trial_id.isdigit() else math.inf, trial_id)


def number_label(value: float) -> str:
    """`64` for 64.0, else 4 significant digits."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e6 else f"{value:.4g}"


def best_scored(
    scored: Sequence[tuple[dict[str, Any], float]], metric: Metric
) -> tuple[dict[str, Any], float] | None:
    """The (parameters, value) the selection would pick from `scored` (in trial order).

    Selection's own rule (`selection.rank_key`): the metric, then on a tie the cheaper
    configuration, then the earlier trial, so the report stars the trial that is retrained.
    """
    if not scored:
        return None
    ranked = [
        (rank_key(str(i), value, params, goal=metric.goal), i)
        for i, (params, value) in enumerate(scored)
    ]
    return scored[min(ranked)[1]]


def parameter_names(trials: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every parameter id the trials use, in first-seen order (conditional ones included)."""
    names: dict[str, None] = {}
    for trial in trials:
        names.update(dict.fromkeys(trials_lib.trial_parameters(trial)))
    return list(names)


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=100, bbox_inches="tight")
    plotting.pyplot().close(fig)
    return path


def _in_order(trials: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Trials as they ran: a continued study's earlier runs first (as listed), then this run's.

    By number within each run (`first:10` after `first:9`).
    """
    origins = list(dict.fromkeys(o for t in trials if (o := continuation.origin(t))))

    def key(trial: Mapping[str, Any]) -> tuple[int, tuple[float, str]]:
        run = continuation.origin(trial)
        number = str(trial["id"]).rsplit(continuation.ORIGIN_SEP, 1)[-1]
        return (origins.index(run) if run else len(origins), id_key(number))

    return sorted(trials, key=key)


def plot_metric_per_trial(trials: Sequence[Mapping[str, Any]], metric: Metric, path: Path) -> Path:
    """The metric of each trial in trial order, the best so far as a step line, failures marked."""
    plt = plotting.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ordered = _in_order(trials)
    xs: list[int] = []
    ys: list[float] = []
    best: list[float] = []
    failed: list[int] = []
    stopped: list[tuple[int, float]] = []
    pick = max if metric.goal == "maximize" else min
    for position, trial in enumerate(ordered, start=1):
        value = trials_lib.final_metric(trial, metric.metric_id)
        if value is None:
            failed.append(position)
            continue
        if (trial.get(trials_lib.LOCAL_KEY) or {}).get("earlyStopped"):
            stopped.append((position, value))
        xs.append(position)
        ys.append(value)
        best.append(pick(best[-1], value) if best else value)
    ax.plot(xs, ys, "o", label=metric.metric_id)
    if xs:
        ax.step(xs, best, where="post", color="tab:orange", label=f"best so far ({metric.goal})")
    if stopped:
        ax.plot(*zip(*stopped, strict=True), "X", color="tab:red", label="early-stopped")
    if failed:  # no metric: marked along the bottom of the axes
        ax.plot(
            failed,
            [0.03] * len(failed),
            "x",
            color="tab:red",
            transform=ax.get_xaxis_transform(),
            label="no metric (failed or running)",
        )
    if len(ordered) <= MAX_TICKS:
        labels = [str(t["id"]) for t in ordered]
        slanted = max(map(len, labels)) > 3  # a continued study's `run:id`: upright, apart
        ax.set_xticks(
            range(1, len(ordered) + 1),
            labels,
            rotation=90 if slanted else 0,
            fontsize=8 if slanted else None,
        )
    ax.set_xlabel("trial")
    ax.set_ylabel(metric.metric_id)
    ax.set_title(f"{metric.metric_id} per trial")
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def wants_log_axis(values: Sequence[Any]) -> bool:
    """Whether numeric values span two orders of magnitude (all positive)."""
    return (
        bool(values)
        and _numeric(values)
        and min(values) > 0
        and max(values) / min(values) >= LOG_SPAN
    )


def _as_numbers(values: Sequence[Any], kind: str | None) -> bool:
    """Whether a parameter's values are placed as numbers (not as strings)."""
    return kind != "categorical" and _numeric(values)


def _category(value: Any, numbers: bool) -> str:
    return number_label(float(value)) if numbers else str(value)


def category_labels(values: Sequence[Any], kind: str | None = None) -> list[str] | None:
    """The tick labels of a categorical axis for a parameter's values, or None for a numeric one.

    Discrete and categorical parameters are categories, one tick per distinct value (numbers
    in numeric order, `64` not `64.0`); so is an integer parameter, or one of unknown `kind`
    (a study without its spec), whose integral values take at most `MAX_CATEGORIES` values.
    A double is numeric; so is anything else numeric.
    """
    numbers = _as_numbers(values, kind)
    if not numbers:
        return sorted({str(v) for v in values})
    distinct = sorted({float(v) for v in values})
    integral = all(v.is_integer() for v in distinct)
    if kind == "discrete" or (
        kind in (None, "integer") and integral and 0 < len(distinct) <= MAX_CATEGORIES
    ):
        return [_category(v, True) for v in distinct]
    return None


def parameters_figure(
    trials: Sequence[Mapping[str, Any]],
    metric: Metric,
    types: Mapping[str, str] | None = None,
    scales: Mapping[str, str] | None = None,
) -> Any:
    """The metric against each parameter, one panel per parameter; the best trial starred.

    `types` (parameter id -> type, as in `StudyTrials.parameter_types`) picks the axis;
    see `category_labels`. A parameter searched on a log scale (`scales`) gets a log
    axis, as does one whose values span two orders of magnitude.
    """
    plt = plotting.pyplot()
    types, scales = types or {}, scales or {}
    names = parameter_names(trials) or ["(no parameters)"]
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.2 * rows), squeeze=False)
    scored = [
        (trials_lib.trial_parameters(t), v)
        for t in _in_order(trials)
        if (v := trials_lib.final_metric(t, metric.metric_id)) is not None
    ]
    best = best_scored(scored, metric)
    for ax, name in zip(axes.flat, names, strict=False):
        raw = [params[name] for params, _ in scored if name in params]
        ys = [value for params, value in scored if name in params]
        labels = category_labels(raw, types.get(name))
        numbers = _as_numbers(raw, types.get(name))

        def x_of(value: Any, labels: list[str] | None = labels, numbers: bool = numbers) -> Any:
            return value if labels is None else labels.index(_category(value, numbers))

        if labels is not None:  # one position per category
            ax.set_xticks(range(len(labels)), labels)
            ax.set_xlim(-0.5, max(len(labels), 1) - 0.5)
        else:
            ax.margins(x=0.08)
            if wants_log_axis(raw) or (scales.get(name) == "log" and _numeric(raw) and raw):
                ax.set_xscale("log")
        ax.scatter([x_of(v) for v in raw], ys, alpha=0.8)
        ax.margins(y=0.12)  # room for the best trial's star at the top
        if best is not None and name in best[0]:
            x = x_of(best[0][name])
            ax.scatter([x], [best[1]], marker="*", s=200, color="tab:red", label="best")
        ax.set_xlabel(name)
        ax.set_ylabel(metric.metric_id)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    starred = " (★ best trial)" if best is not None else ""
    fig.suptitle(f"{metric.metric_id} against each parameter{starred}")
    fig.tight_layout()
    return fig


def plot_parameters(
    trials: Sequence[Mapping[str, Any]],
    metric: Metric,
    path: Path,
    types: Mapping[str, str] | None = None,
    scales: Mapping[str, str] | None = None,
) -> Path:
    """`parameters_figure` as a PNG."""
    return _save(parameters_figure(trials, metric, types, scales), path)


def plot_curves(trials: Sequence[Mapping[str, Any]], metric: Metric, path: Path) -> Path:
    """The metric per step (epoch) of each trial, from its intermediate measurements.

    An early-stopped trial's last point is a red cross and its label says so; the legend
    sits beside the axes, so it hides no curve.
    """
    plt = plotting.pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4))
    drawn = 0
    for trial in _in_order(trials):
        points = [
            (int(m.get("stepCount", 0)), value)
            for m in trial.get("measurements", [])
            if (value := trials_lib.measurement_metrics(m).get(metric.metric_id)) is not None
        ]
        if not points:
            continue
        succeeded = trials_lib.trial_state(trial) == trials_lib.TrialState.SUCCEEDED
        steps, values = zip(*sorted(points), strict=True)
        stopped = bool((trial.get(trials_lib.LOCAL_KEY) or {}).get("earlyStopped"))
        label = f"trial {trial['id']}" + (" (early-stopped)" if stopped else "")
        ax.plot(steps, values, "-" if succeeded else "--", marker=".", label=label)
        if stopped:
            ax.plot(steps[-1], values[-1], "X", color="tab:red", markersize=10, zorder=5)
        drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no intermediate measurements", ha="center", transform=ax.transAxes)
    elif drawn <= 12:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step (epoch)")
    ax.set_ylabel(metric.metric_id)
    ax.set_title(f"{metric.metric_id} per epoch (dashed: did not succeed; ✕ early-stopped)")
    fig.tight_layout()
    return _save(fig, path)
