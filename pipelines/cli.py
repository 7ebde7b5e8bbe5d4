"""`hpt-pipeline`: prepare data, run the pipeline locally, compile, submit and schedule on Vertex.

This module must stay fast to import: no TensorFlow here, and heavy modules
are imported inside the commands that need them.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="hpt-pipeline",
    help="Hyperparameter tuning + multi-worker TensorFlow training, locally or on Vertex AI.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit non-zero."""
    typer.echo(f"hpt-pipeline: error: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app()
