"""How a study went: its trials as a table sorted by the metric, PNG plots and one HTML page.

Trials come from a local run (its trials artifact, or the study's trials.json)
or from a Vertex HPT job (through aiplatform), all in the trials artifact's
schema (`pipelines.study.trials`). The metric and goal default to the study's own.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.lineage import graph as lineage_graph
from pipelines.lineage import local as local_lineage_lib
from pipelines.reports import pareto_plot, running_study, trial_plots
from pipelines.reports.durations import duration_seconds, format_duration
from pipelines.reports.trial_plots import parameter_names
from pipelines.study import continuation
from pipelines.study import trials as trials_lib
from pipelines.study.halving import pruned_at
from pipelines.study.objectives import parse_constraints
from pipelines.study.search_space import GOALS, Metric
from pipelines.study.selection import rank_key
from pipelines.study.spec_reader import parse_study_spec_metrics, parse_study_spec_parameters
from trainer.contract import METRIC_GOALS

REPORT_DIR = "trial-report"
PAGE = "index.html"
METRIC_PLOT = "metric_per_trial.png"
PARAMETER_PLOT = "parameters.png"
CURVE_PLOT = "curves.png"
SELECTION_OUTPUT = "summary"  # the select-best-trial step's output: front, constraints, why
PARETO_PLOT = "pareto_front.png"
STUDY_FILE = "study.json"  # the local study's summary, next to its trials.json
_HPT_JOB = re.compile(r"^projects/[^/]+/locations/[^/]+/hyperparameterTuningJobs/[^/]+$")


class ReportError(ValueError):
    """Trials that cannot be found or reported; one line."""


@dataclasses.dataclass(frozen=True)
class StudyTrials:
    """Trials and where they came from."""

    trials: list[dict[str, Any]]
    source: str  # the trials file, or the HPT job's resource name
    objective: Metric | None  # the study's (first) metric, when known
    home: Path | None  # the local folder a report goes under by default
    # parameter id -> `Parameter.type` (double, integer, discrete, categorical), when known
    parameter_types: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # parameter id -> scale (linear, log, reverse_log) as the study spec declares it
    parameter_scales: Mapping[str, str] = dataclasses.field(default_factory=dict)
    objectives: tuple[Metric, ...] = ()  # every objective of the study, the primary first
    constraints: tuple[str, ...] = ()  # the run's selection constraints, when known


@dataclasses.dataclass(frozen=True)
class TrialRow:
    """One line of the trials table."""

    trial_id: str
    state: str
    metric: float | None
    seconds: float | None
    parameters: dict[str, Any]
    note: str
    precision: str | None = None  # the policy the trainer resolved (local trials), else None
    outcome: str = ""  # `trials.trial_outcome`: the words every screen and page uses
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # every objective's
    origin: str = ""  # the earlier run a continued study's trial came from; "" for this run


@dataclasses.dataclass(frozen=True)
class Report:
    """What `write_report` wrote, and the rows it showed."""

    page: Path
    figures: dict[str, Path]
    rows: list[TrialRow]
    metric: Metric


# --------------------------------------------------------------------------- loading


def hpt_job_name(run: str, project: str | None = None, region: str | None = None) -> str | None:
    """`run` as an HPT job resource name (itself, or a numeric id with project and region)."""
    if _HPT_JOB.match(run):
        return run
    if project and region and run.isdigit():
        return f"projects/{project}/locations/{region}/hyperparameterTuningJobs/{run}"
    return None


def _study_spec(study_dir: Path) -> dict[str, Any]:
    """The `studySpec` of a local study's `study.json`; empty without a readable one."""
    try:
        spec = json.loads((study_dir / STUDY_FILE).read_text()).get("studySpec", {})
    except (OSError, ValueError):  # missing or not JSON
        return {}
    return spec if isinstance(spec, dict) else {}


def _objectives(metric_specs: Sequence[Any]) -> tuple[Metric, ...]:
    """A study spec's metrics, the primary first; empty without a readable one."""
    try:
        return tuple(parse_study_spec_metrics(metric_specs))
    except ValueError:  # not a metric spec
        return ()


def _objective(metric_specs: Sequence[Any]) -> Metric | None:
    """The first metric of a study spec's metrics; None without a readable one."""
    return next(iter(_objectives(metric_specs)), None)


def _run_constraints(path: Path) -> tuple[str, ...]:
    """The constraints a local run's selection applied (its `summary`); empty when unknown."""
    try:
        run_dir = local_lineage_lib.resolve_run_dir(path)
    except lineage_graph.LineageError:
        return ()
    summary = local_lineage_lib.find_output(run_dir, SELECTION_OUTPUT) or {}
    return tuple(summary.get("metadata", {}).get("constraints") or ())


def parameter_types(parameter_specs: Sequence[Any], field: str = "type") -> dict[str, str]:
    """`{parameter id: type}` of a study spec's parameters (conditional ones included).

    `field="scale"` gives their declared scales instead. Empty when the specs cannot be
    read: the plots then go by the values alone.
    """
    try:
        top = parse_study_spec_parameters(parameter_specs)
    except ValueError:
        return {}
    found: dict[str, str] = {}
    stack = list(top)
    while stack:
        p = stack.pop()
        if getattr(p, field):
            found[p.parameter_id] = getattr(p, field)
        stack.extend(p.conditional)
    return found


def title_of(source: str) -> str:
    """A report's title: the run or HPT job it shows, never a filesystem path."""
    if source.startswith("projects/"):
        return f"Trials of HPT job {source.rsplit('/', 1)[-1]}"
    plumbing = {"trials", "trials.json", "study", "tune-locally", "artifacts", ""}
    names = [part for part in reversed(Path(source).parts) if part not in plumbing]
    return f"Trials of {names[0]}" if names and names[0] != "/" else "Trials"


def _local_trials(path: Path) -> tuple[Path, Path, Path | None]:
    """(trials file, folder a report goes under, study folder) of a local path.

    A report about a study folder goes next to it, never into it. An output whose study
    changed after its newest run's trials artifact (tuning is running) is reported from
    the study's trials, the report going under the output.
    """
    if path.is_dir() and (path / trials_lib.TRIALS_FILE).is_file():
        path = path / trials_lib.TRIALS_FILE
    if path.is_file():
        folder = path.parent
        in_study = (folder / STUDY_FILE).is_file()
        return path, folder.parent if in_study else folder, folder
    try:
        run_dir = local_lineage_lib.resolve_run_dir(path)
    except lineage_graph.LineageError as err:
        running = running_study.trials_of(path)
        if running is None:
            raise ReportError(str(err)) from None
        return running
    artifact = local_lineage_lib.find_output(run_dir, lineage_graph.TRIALS_OUTPUT)
    output = run_dir.parent.parent
    newest = local_lineage_lib.run_dirs(output)[-1:] == [run_dir]
    running = running_study.trials_of(output) if newest else None
    if running is not None and running_study.is_newer(running[0], artifact):
        return running  # the output's study has moved on since its newest run's trials
    if artifact is None:
        raise ReportError(f"{run_dir}: this run has no trials artifact (did tuning finish?)")
    study = artifact.get("metadata", {}).get("study")
    return Path(artifact.get("uri", "")), run_dir, Path(study) if study else None


def locate(run: str, project: str | None = None, region: str | None = None) -> Path | str:
    """Where `run`'s trials are: an existing local path, or an HPT job's resource name.

    Raises:
        ReportError: `run` is neither (nor a numeric job id with `project` and `region`).
    """
    if Path(run).exists():
        return Path(run)
    job_name = hpt_job_name(run, project, region)
    if job_name is None:
        raise ReportError(
            f"{run}: not a local run, study folder or trials file, nor "
            "projects/P/locations/L/hyperparameterTuningJobs/ID (or an id with --project/--region)"
        )
    return job_name


def load_trials(
    run: str,
    *,
    project: str | None = None,
    region: str | None = None,
    credentials: Any = None,
) -> StudyTrials:
    """Trials of a local run, study folder or trials file, or of a Vertex HPT job.

    Args:
        run: A `hpt-pipeline run --output` folder (its newest run), a run folder, a study
            folder or trials JSON file, or `projects/P/locations/L/hyperparameterTuningJobs/ID`
            (or the job's numeric id, with `project` and `region`).
        project: Google Cloud project of a job given by id.
        region: Region of a job given by id.
        credentials: google-auth credentials for Vertex; None uses the environment's.

    Raises:
        ReportError: `run` is none of those.
        TrialsError: The trials file does not follow the schema.
    """
    where = locate(run, project, region)
    if isinstance(where, str):
        return _vertex_trials(where, credentials)
    trials_file, home, study = _local_trials(where)
    spec = _study_spec(study) if study else {}
    objectives = _objectives(spec.get("metrics", []))
    return StudyTrials(
        running_study.with_progress(trials_lib.read_trials(str(trials_file)), study, objectives),
        str(trials_file),
        _objective(spec.get("metrics", [])),
        home,
        parameter_types(spec.get("parameters", [])),
        parameter_types(spec.get("parameters", []), "scale"),
        objectives,
        _run_constraints(where) if not where.is_file() else (),
    )


def _vertex_trials(job_name: str, credentials: Any) -> StudyTrials:
    from google.cloud import aiplatform
    from google.cloud.aiplatform_v1.types import StudySpec

    from pipelines.targets.vertex import trials as vertex_trials

    trials = [
        trials_lib.normalize_trial(t) for t in vertex_trials.fetch_trials(job_name, credentials)
    ]
    project, location = job_name.split("/")[1], job_name.split("/")[3]
    job = aiplatform.HyperparameterTuningJob.get(
        job_name, project=project, location=location, credentials=credentials
    )
    spec = job.gca_resource.study_spec
    metrics = [StudySpec.MetricSpec.to_json(m) for m in spec.metrics]
    objectives = _objectives(metrics)
    specs = [StudySpec.ParameterSpec.to_json(p) for p in spec.parameters]
    scales = parameter_types(specs, "scale")
    return StudyTrials(
        trials,
        job_name,
        next(iter(objectives), None),
        None,
        parameter_types(specs),
        scales,
        objectives,
    )


def resolve_metric(study: StudyTrials, metric: str | None, goal: str | None) -> Metric:
    """The metric and goal to sort and plot by: the given ones, else the study's.

    Without either, the first metric the trials report. A metric given without a goal
    takes the study's goal for it (one of its objectives), else the trainer's
    (`trainer.contract.METRIC_GOALS`: `val_loss` is minimized), else maximize.

    Raises:
        ReportError: An unknown goal, or no metric at all.
    """
    if goal is not None and goal not in GOALS:
        raise ReportError(f"goal={goal!r}: expected one of {', '.join(GOALS)}")
    default = study.objective
    if default is None:
        reported = [
            m
            for t in study.trials
            for m in trials_lib.measurement_metrics(t.get("finalMeasurement"))
        ]
        default = (
            Metric(reported[0], METRIC_GOALS.get(reported[0], "maximize")) if reported else None
        )
    metric_id = metric or (default.metric_id if default else None)
    if not metric_id:
        raise ReportError(f"{study.source}: no trial reports a metric; pass --metric")
    known = {o.metric_id: o.goal for o in study.objectives}
    if default is not None:
        known.setdefault(default.metric_id, default.goal)
    return Metric(
        metric_id, goal or known.get(metric_id) or METRIC_GOALS.get(metric_id, "maximize")
    )


# --------------------------------------------------------------------------- the table


def format_value(value: Any) -> str:
    """A parameter or metric value for display (4 significant digits for floats)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return trial_plots.number_label(value)
    return str(value)


def _note(trial: Mapping[str, Any]) -> str:
    local = trial.get(trials_lib.LOCAL_KEY) or {}
    notes = [trial.get("infeasibleReason", "")]
    rung = pruned_at(trial)
    stopped = "early stopped" if rung is None else f"stopped at rung {rung} (not picked)"
    notes.append(stopped if local.get("earlyStopped") else "")
    notes.append(running_study.so_far(trial, format_value))
    return "; ".join(n for n in notes if n)


def trial_rows(
    trials: Sequence[Mapping[str, Any]], metric: Metric, objectives: Sequence[Metric] = ()
) -> list[TrialRow]:
    """One row per trial, best first (per `metric.goal`), with every objective's value.

    Trials without the metric (failed, still running) or diverged come last, by id.
    """
    names = [o.metric_id for o in objectives]
    rows = [
        TrialRow(
            trial_id=str(t["id"]),
            state=trials_lib.trial_state(t).name,
            metric=trials_lib.final_metric(t, metric.metric_id),
            seconds=duration_seconds(t),
            parameters=trials_lib.trial_parameters(t),
            note=_note(t),
            precision=(t.get(trials_lib.LOCAL_KEY) or {}).get("precision"),
            outcome=trials_lib.trial_outcome(t),
            metrics={
                n: v
                for n, v in trials_lib.measurement_metrics(t.get("finalMeasurement")).items()
                if n in names
            },
            origin=continuation.origin(t),
        )
        for t in trials
    ]
    ranked = [r for r in rows if r.metric is not None and r.outcome != trials_lib.DIVERGED]
    scored = sorted(  # best first, ties broken as the best trial's selection breaks them
        ranked,
        key=lambda r: rank_key(r.trial_id, r.metric, r.parameters, goal=metric.goal),  # type: ignore[arg-type]
    )
    unscored = sorted(
        (r for r in rows if r.metric is None or r.outcome == trials_lib.DIVERGED),
        key=lambda r: trial_plots.id_key(r.trial_id),
    )
    return scored + unscored


# --------------------------------------------------------------------------- the page


def continued(rows: Sequence[TrialRow]) -> list[str]:
    """`["run"]`, the origin column's header, when some trial came from an earlier run; else []."""
    return ["run"] if any(r.origin for r in rows) else []


def default_report_dir(study: StudyTrials) -> Path:
    """`<run or study folder>/trial-report`, or `trial-report-<job id>` here for Vertex."""
    if study.home is not None:
        return study.home / REPORT_DIR
    return Path(f"{REPORT_DIR}-{study.source.rsplit('/', 1)[-1]}")


def state_counts(trials: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Trials per outcome (`trials.trial_outcome`: succeeded, diverged, failed, interrupted…)."""
    counts: dict[str, int] = {}
    for trial in trials:
        name = trials_lib.trial_outcome(trial)
        counts[name] = counts.get(name, 0) + 1
    return counts


def metric_columns(metric: Metric, objectives: Sequence[Metric]) -> list[str]:
    """The table's metric columns: the sorting metric, then every other objective."""
    return [metric.metric_id, *(o.metric_id for o in objectives if o.metric_id != metric.metric_id)]


def row_values(row: TrialRow, columns: Sequence[str]) -> list[float | None]:
    """A row's values for `metric_columns` (the first is the sorting metric)."""
    return [row.metric, *(row.metrics.get(c) for c in columns[1:])]


def _table_html(rows: Sequence[TrialRow], columns: Sequence[str], names: Sequence[str]) -> str:
    runs = continued(rows)
    head = ["trial", *runs[:1], "outcome", *columns, "duration", "precision", *names, "note"]
    lines = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = [
            row.trial_id,
            *([row.origin or "this run"] if runs else []),
            row.outcome,
            *(format_value(v) for v in row_values(row, columns)),
            format_duration(row.seconds),
            format_value(row.precision),
            *(format_value(row.parameters.get(n)) for n in names),
            row.note,
        ]
        css = "" if row.outcome == trials_lib.SUCCEEDED else ' class="failed"'
        lines.append(f"<tr{css}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return "<table>" + "\n".join(lines) + "</table>"


def _selection_html(picked: Any, constraints: Sequence[Any]) -> str:
    """The pick on the Pareto front and the constraints, for a study of several objectives."""
    lines = [f"constraints: {html.escape(', '.join(map(str, constraints)))}"] if constraints else []
    if picked is not None:
        lines.append(f"picked {html.escape(picked.reason)}; front: {', '.join(picked.front)}")
    return f"<p>{'<br>'.join(lines)}</p>" if lines else ""


def write_report(study: StudyTrials, out_dir: str | Path, metric: Metric) -> Report:
    """Write the three PNG plots and `index.html` (table + embedded plots) into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trials = study.trials
    figures = {
        "metric per trial": trial_plots.plot_metric_per_trial(trials, metric, out / METRIC_PLOT),
        "parameters": trial_plots.plot_parameters(
            trials, metric, out / PARAMETER_PLOT, study.parameter_types, study.parameter_scales
        ),
        "learning curves": trial_plots.plot_curves(trials, metric, out / CURVE_PLOT),
    }
    constraints = parse_constraints(study.constraints, study.objectives or (metric,))
    picked = None
    if len(study.objectives) > 1:
        figures["Pareto front"] = pareto_plot.plot_pareto(
            trials, study.objectives, constraints, out / PARETO_PLOT
        )
        picked = pareto_plot.pick(trials, study.objectives, constraints)
    rows = trial_rows(trials, metric, study.objectives)
    counts = ", ".join(f"{n} {s.lower()}" for s, n in state_counts(trials).items())
    best = rows[0] if rows and rows[0].metric is not None else None
    best_text = (
        f"best: trial {html.escape(best.trial_id)} ({metric.metric_id} {format_value(best.metric)})"
        if best
        else "no trial reported the metric"
    )
    images = "".join(
        f'<figure><img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"<figcaption>{html.escape(title)}</figcaption></figure>"
        for title, p in figures.items()
    )
    title = html.escape(title_of(study.source))
    page = out / PAGE
    page.write_text(
        f"""<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:3px 10px;text-align:right}}
tr.failed td{{color:#b71c1c}}figure{{display:inline-block;margin:1em}}img{{max-width:100%}}</style>
</head><body><h1>{title}</h1>
<p>From <code>{html.escape(study.source)}</code>.
{len(trials)} trials ({html.escape(counts or "none")}); sorted by
<b>{html.escape(metric.metric_id)}</b> ({metric.goal}); {best_text}.</p>
{_selection_html(picked, constraints)}
{_table_html(rows, metric_columns(metric, study.objectives), parameter_names(trials))}
{images}</body></html>
"""
    )
    return Report(page=page, figures=figures, rows=rows, metric=metric)
