"""What a cloud command sends: the `--template` given, or the target compiled now."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.settings import Settings, SettingsError


@contextlib.contextmanager
def compiled_template(template: Path | None, settings: Settings, target: str) -> Iterator[Path]:
    """`template`, or `target` compiled from `settings` into a temporary file.

    A `continue_from` is compiled in (the earlier trials are a parameter default): with a
    `template` it is refused rather than dropped; compiled now, what the target does with
    the earlier trials is said in lines on stderr.

    Raises:
        SettingsError: `template` was compiled for another target (`templates.check_target`),
            or comes with a `continue_from`; settings the plan refuses (`plan.resolve`).
    """
    if template is not None:
        if settings.study.continue_from:
            raise SettingsError(
                f"continue_from={settings.study.continue_from}: the earlier trials are compiled "
                "into "
                f"the pipeline; compile --template {template} with it, or leave out --template"
            )
        from pipelines.templates import check_target
        from pipelines.wiring import tune_tasks

        check_target(template, target, tune_tasks())
        yield template
        return
    import typer

    from pipelines.app.continuing import continuation_lines
    from pipelines.compiler import compile_pipeline
    from pipelines.plan import resolve
    from pipelines.wiring import TARGETS

    plan = resolve(settings, runs_here=TARGETS[target].runs_here)
    for line in continuation_lines(plan, target):
        typer.echo(f"note: {line}", err=True)

    with tempfile.TemporaryDirectory(prefix="hpt-pipeline-") as tmp:
        yield Path(compile_pipeline(target, plan, str(Path(tmp) / "pipeline.yaml")))


def check_output(output: Path | None, dry_run: bool) -> None:
    """Refuse `--output` without `--dry-run` (only a dry run writes a request).

    Raises:
        SettingsError: Naming the output.
    """
    if output is not None and not dry_run:
        raise SettingsError(f"--output={output}: only used with --dry-run")


def write_request(request: dict[str, Any], output: Path | None) -> str:
    """Write a dry-run request as JSON to `output` (stdout when None); returns where."""
    import json

    import typer

    text = json.dumps(request, indent=2, sort_keys=True) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return "stdout"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    return str(output)
