"""`hpt-pipeline`: prepare data, run locally, compile, submit and schedule on Vertex or Kubeflow.

This module only assembles the commands; each lives in the `pipelines.app` module named
for what it works on, or in its target's `cli/` (`run`, `manifests`). It must stay fast to
import: no TensorFlow here, and heavy modules are imported inside the commands that need them.
"""

from __future__ import annotations

import typer

from pipelines.app import (
    cloud_commands,
    compile_command,
    data_commands,
    report_commands,
    schedule_actions,
)
from pipelines.targets.kubeflow.cli import commands as kubeflow_commands
from pipelines.targets.local.cli import commands as local_commands

app = typer.Typer(
    name="hpt-pipeline",
    help="Hyperparameter tuning + multi-worker TensorFlow training: here, on Vertex AI, Kubeflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"hpt-pipeline {version('hpt-pipeline')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",  # a flag: no `<bool>` beside it
        help="Print the version and exit.",
    ),
) -> None:
    """Hyperparameter tuning + multi-worker TensorFlow training: here, on Vertex AI, Kubeflow."""


app.command("prepare")(data_commands.prepare)
app.command("run")(local_commands.run)
app.command("compile")(compile_command.compile_command)
app.command("models")(local_commands.models)
app.command("trials")(report_commands.trials)
app.command("lineage")(report_commands.lineage)
app.command("submit")(cloud_commands.submit)
# `schedule create` is in cloud_commands, list/pause/resume/delete in schedule_actions.
app.add_typer(schedule_actions.schedule_app, name="schedule")
app.command("manifests")(kubeflow_commands.manifests_command)


def main() -> None:
    """Console-script entry point."""
    app()
