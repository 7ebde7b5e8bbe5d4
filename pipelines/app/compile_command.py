"""`hpt-pipeline compile`: the pipeline for any registered target, as a pipeline spec (YAML)."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.app.continuing import CONTINUE_HELP, continuation_lines
from pipelines.app.errors import fail
from pipelines.app.pipeline_settings import TRIAL_WORKERS_HELP, checked_settings
from pipelines.settings import SettingsError
from pipelines.wiring import TARGETS

SPEC_SUFFIXES = (".yaml", ".yml")  # what kfp's compiler writes as YAML (`submit` reads these)


def compile_command(
    target: str = typer.Option("local", help=" | ".join(TARGETS)),
    output: Path = typer.Option(..., help="Where to write the pipeline spec YAML."),
    config: Path = typer.Option(None, help="YAML settings file."),
    continue_from: str = typer.Option(None, help=CONTINUE_HELP),
    namespace: str = typer.Option(
        None, "--namespace", help="Kubernetes namespace of the runs (kubeflow)."
    ),
    trial_workers: int = typer.Option(None, help=TRIAL_WORKERS_HELP),
) -> None:
    """Compile the pipeline for a target into a pipeline spec (YAML)."""
    from pipelines.app.dispatch import refuse_other_flags
    from pipelines.compiler import compile_pipeline

    if target not in TARGETS:
        fail(f"--target={target}: expected one of {', '.join(TARGETS)}")
    if output.suffix not in SPEC_SUFFIXES:  # kfp writes only these (.json: without our mark)
        fail(f"--output={output}: expected a file name ending in {' or '.join(SPEC_SUFFIXES)}")
    chosen = TARGETS[target]
    try:
        refuse_other_flags(chosen, {"namespace": namespace})
    except SettingsError as err:
        fail(str(err))
    plan = checked_settings(
        config,
        None,
        runs_here=chosen.runs_here,
        continue_from=continue_from,
        kubeflow_namespace=namespace,
        trial_workers=trial_workers,
    )
    settings = plan.settings
    for line in continuation_lines(plan, target) + chosen.binding.notes(settings):
        typer.echo(f"note: {line}")
    try:
        if not chosen.runs_here:  # its pods pull the images: a placeholder fails the first pull
            from pipelines.app.preflight import check_image_uris

            check_image_uris(settings, "set {env} (or {name} in --config) to the pushed image")
        path = compile_pipeline(target, plan, output)
    except SettingsError as err:  # a setting the target cannot honour
        fail(str(err))
    except OSError as err:  # a folder that cannot be created or written
        fail(f"--output={output}: cannot write it ({err.strerror or err})")
    typer.echo(f"compiled the {target} pipeline to {path}")
