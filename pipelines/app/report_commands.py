"""`hpt-pipeline trials` and `hpt-pipeline lineage`: what a run did, locally or on Vertex.

Heavy modules (matplotlib, aiplatform, kfp) are imported inside the commands.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pipelines.app import formats
from pipelines.app.errors import cloud_errors, fail

if TYPE_CHECKING:
    from rich.table import Table

    from pipelines.reports.trial_report import Metric, Report, StudyTrials, TrialRow

FORMATS = ("tree", "mermaid", "html")

ProjectOption = Annotated[
    str | None, typer.Option("--project", help="Google Cloud project (with a bare job id).")
]
RegionOption = Annotated[
    str | None, typer.Option("--region", help="Vertex AI region (with a bare job id).")
]


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """Bad input, unreadable files, auth and API errors → the CLI's one-line error (exit 2)."""
    from pipelines.lineage.graph import LineageError
    from pipelines.reports.trial_report import ReportError
    from pipelines.study.search_space import SearchSpaceError
    from pipelines.study.trials import TrialsError

    try:
        with cloud_errors():
            yield
    except (ReportError, LineageError, TrialsError, SearchSpaceError) as err:
        fail(str(err))
    except OSError as err:
        fail(f"{err.filename or ''}: {err.strerror or err}".lstrip(": "))


def _is_local(run: str) -> bool:
    return Path(run).exists()


def _credentials() -> Any:
    from pipelines.targets.vertex.client import credentials

    return credentials(offline=False)


def trials(
    run: Annotated[
        str,
        typer.Argument(
            help="A run --output folder (its newest run), a run folder, a study folder or "
            "trials JSON, or projects/P/locations/L/hyperparameterTuningJobs/ID.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            file_okay=False,
            help="Folder for the PNGs and index.html (default: <run>/trial-report).",
        ),
    ] = None,
    metric: Annotated[
        str | None, typer.Option("--metric", help="Metric to sort by (default: the study's).")
    ] = None,
    goal: Annotated[
        str | None,
        typer.Option(
            "--goal", help="maximize | minimize (default: the study's or trainer's goal)."
        ),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="table (with the PNG/HTML report) | csv | json (the trials on stdout, "
            "Vertex's Trial schema plus the table's columns; no report written).",
        ),
    ] = "table",
    project: ProjectOption = None,
    region: RegionOption = None,
) -> None:
    """Report a study's trials: a table sorted by the metric, plots as PNG and one HTML page."""
    from pipelines.reports import trial_report

    formats.check_format(format)
    with _one_line_errors():
        remote = isinstance(trial_report.locate(run, project, region), str)
        study = trial_report.load_trials(
            run, project=project, region=region, credentials=_credentials() if remote else None
        )
        if not study.trials:
            fail(f"{study.source}: no trials yet")
        chosen = trial_report.resolve_metric(study, metric, goal)
        if format != "table":
            rows = trial_report.trial_rows(study.trials, chosen, study.objectives)
            typer.echo(_trials_data(study, rows, chosen, format), nl=False)
            return
        report = trial_report.write_report(
            study, output or trial_report.default_report_dir(study), chosen
        )
    console = formats.print_table(_trials_table(study, report))
    for path in [*report.figures.values(), report.page]:
        console.print(f"wrote {path}", soft_wrap=True, highlight=False)


def _trials_data(study: StudyTrials, rows: list[TrialRow], metric: Metric, format: str) -> str:
    """The trials, best first, as CSV (the table's columns) or JSON (trials + columns)."""
    from pipelines.reports.trial_report import (
        continued,
        metric_columns,
        parameter_names,
        row_values,
    )

    names = parameter_names(study.trials)
    columns = metric_columns(metric, study.objectives)
    if format == "csv":
        runs = continued(rows)
        header = ["trial", *runs, "state", *columns, "seconds", "precision", *names]
        return formats.csv_text(
            [*header, "note"],
            (
                [r.trial_id, *([r.origin or "this run"] if runs else [])]
                + [r.state, *row_values(r, columns), r.seconds, r.precision]
                + [r.parameters.get(n) for n in names]
                + [r.note]
                for r in rows
            ),
        )
    by_id = {str(t["id"]): t for t in study.trials}
    return formats.json_text(
        {
            "source": study.source,
            "metric": {"metricId": metric.metric_id, "goal": metric.goal},
            "objectives": [{"metricId": o.metric_id, "goal": o.goal} for o in study.objectives],
            "constraints": list(study.constraints),
            "trials": [
                {
                    **by_id[r.trial_id],
                    "row": {
                        "run": r.origin or "this run",
                        "state": r.state,
                        "metric": r.metric,
                        "metrics": r.metrics,  # every objective's final value
                        "seconds": r.seconds,
                        "precision": r.precision,
                        "parameters": r.parameters,
                        "note": r.note,
                    },
                }
                for r in rows
            ],
        }
    )


def _trials_table(study: StudyTrials, report: Report) -> Table:
    """The trials as a Rich table, best first; trials that did not succeed in red."""
    from rich.table import Table

    from pipelines.reports.trial_report import (
        continued,
        format_duration,
        format_value,
        metric_columns,
        parameter_names,
        row_values,
    )

    metric = report.metric
    names = parameter_names(study.trials)
    columns = metric_columns(metric, study.objectives)
    table = Table(
        title=f"{len(study.trials)} trials, sorted by {metric.metric_id} ({metric.goal})",
        caption=study.source,
    )
    runs = continued(report.rows)
    table.add_column("trial", justify="right")
    for header in runs:  # trials of a continued study: the run each came from
        table.add_column(header)
    table.add_column("outcome", min_width=10)
    for column in columns:
        table.add_column(column, justify="right")
    table.add_column("duration", justify="right")
    table.add_column("precision")
    for name in names:
        table.add_column(name, justify="right")
    table.add_column("note", overflow="fold")
    for row in report.rows:
        table.add_row(
            row.trial_id,
            *([row.origin or "this run"] if runs else []),
            row.outcome,
            *(format_value(v) for v in row_values(row, columns)),
            format_duration(row.seconds),
            format_value(row.precision),
            *(format_value(row.parameters.get(n)) for n in names),
            row.note,
            style=None if row.outcome == "succeeded" else "red",
        )
    return table


def lineage(
    run: Annotated[
        str,
        typer.Argument(
            help="A run --output folder (its newest run), a run folder, or "
            "projects/P/locations/L/pipelineJobs/ID.",
            show_default=False,
        ),
    ],
    format: Annotated[
        str, typer.Option("--format", help="tree (terminal) | mermaid | html.")
    ] = "tree",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            dir_okay=False,
            help="File to write (tree, mermaid: default the terminal; html: <run>/lineage.html).",
        ),
    ] = None,
    project: ProjectOption = None,
    region: RegionOption = None,
) -> None:
    """Draw what produced a run's model: dataset → trials → best trial → model → registration."""
    from rich.console import Console

    from pipelines.lineage import local as local_lineage_lib
    from pipelines.lineage import render as lineage_render
    from pipelines.targets.vertex import metadata as vertex_metadata

    if format not in FORMATS:
        fail(f"--format={format}: expected one of {', '.join(FORMATS)}")
    with _one_line_errors():
        if _is_local(run):
            run_dir = local_lineage_lib.resolve_run_dir(run)
            graph = local_lineage_lib.local_lineage(run_dir)
            default_html = run_dir / "lineage.html"
        else:
            job = vertex_metadata.pipeline_job_name(run, project, region)
            graph = vertex_metadata.vertex_lineage(job, _credentials())
            default_html = Path(f"lineage-{job.rsplit('/', 1)[-1]}.html")
        target = output or (default_html if format == "html" else None)
        if format == "tree" and target is None:
            Console().print(lineage_render.rich_tree(graph))
            return
        text = _render(graph, format)
        if target is None:
            typer.echo(text, nl=False)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    typer.echo(f"wrote the {format} lineage of {graph.title} to {target}")


def _render(graph: Any, format: str) -> str:
    """The graph as text: Mermaid, an HTML page, or the tree without colours."""
    from rich.console import Console

    from pipelines.lineage import render as lineage_render

    if format == "mermaid":
        return lineage_render.mermaid(graph)
    if format == "html":
        return lineage_render.html_page(graph)
    buffer = io.StringIO()
    Console(file=buffer, width=160, no_color=True).print(lineage_render.rich_tree(graph))
    return buffer.getvalue()
