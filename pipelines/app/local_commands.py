"""Commands that work on this machine: `run` (the local pipeline), `compile`, `models`."""

import os
import sys
from pathlib import Path
from typing import Any

import typer

from pipelines import scratch
from pipelines.app.continuing import CONTINUE_HELP, continuation_lines
from pipelines.app.errors import fail
from pipelines.settings import (
    LOCAL_RUN_DEFAULTS,
    Settings,
    SettingsError,
    load_settings,
    renamed,
)
from pipelines.study.search_space import preset_names

PRESETS = ", ".join(preset_names())  # the preset files, for the help text


def check_source(source: str) -> None:
    """Cheap pre-flight check of a dataset source (the prepare step checks the rest)."""
    if source == "sample" or source.startswith("gs://"):
        return
    if source.startswith("tfds:"):
        if not source.removeprefix("tfds:").strip():
            raise SettingsError(f"source={source!r}: expected tfds:<dataset name>")
        return
    if not os.path.isdir(source):
        raise SettingsError(
            f"source={source!r}: expected 'sample', 'tfds:<name>', gs://… "
            "or an existing image folder"
        )


def _settings(
    config: Path | None,
    defaults: dict[str, Any] | None,
    *,
    local: bool,
    notes: list[str] | None = None,
    **flags: Any,
) -> Settings:
    from pipelines.settings_space import settings_model, study_space
    from pipelines.study.search_space import SearchSpaceError

    try:
        settings = load_settings(config=config, overrides=flags, defaults=defaults, notes=notes)
        check_source(settings.source)
        # A model that cannot be built, a bad space, or one the algorithm cannot search,
        # fails here, before any work. A run builds the model here: its module must import.
        known = settings_model(settings, importable=local)
        if known.note:
            typer.echo(f"note: {known.note}; its hyperparameters are checked by the trainer")
        study_space(settings, known)
    except (SettingsError, SearchSpaceError) as err:
        fail(str(err))
    return settings


def _preflight(settings: Settings) -> list[str]:
    """Refuse what would fail late on this machine (one line); return the warnings."""
    from pipelines.app import gcs_access, local_preflight

    try:
        local_preflight.check_memory(settings)
        gcs_images = gcs_access.check_gcs(settings)
        local_preflight.check_tfds_reachable(
            settings.source, local_preflight.tfds_data_dir(settings.output)
        )
        disk_note = local_preflight.check_disk(settings, gcs_images=gcs_images)
        local_preflight.check_weights_load(settings)
    except SettingsError as err:
        fail(str(err))
    warning = local_preflight.replica_warning(settings)
    return [line for line in (disk_note, warning) if line]


def run(
    source: str = typer.Option(None, help="'sample' (default), 'tfds:<name>' or an image folder."),
    image_size: int = typer.Option(None, help="Image side in pixels (local default 32)."),
    max_trials: int = typer.Option(None, help="Trials in the study (local default 4)."),
    parallel_trials: int = typer.Option(None, help="Trials at once (local default 2)."),
    max_failed_trials: int = typer.Option(
        None, help="Failed trials that fail the study (as on Vertex); 0 lets the service decide."
    ),
    algorithm: str = typer.Option(
        None,
        help="Search algorithm: GRID_SEARCH, RANDOM_SEARCH, or the default "
        "ALGORITHM_UNSPECIFIED (Vertex's own; TPE here).",
    ),
    model: str = typer.Option(
        None,
        help="cnn (default), resnet50, mobilenet_v3_small, or your own builder as "
        "package.module:function.",
    ),
    weights: str = typer.Option(
        None, help="imagenet | none | a Keras weights file (default: the model's own)."
    ),
    epochs: int = typer.Option(None, help="Epochs per trial and for the final job."),
    batch_size: int = typer.Option(None, help="Per-replica batch size."),
    precision: str = typer.Option(
        None,
        help="auto (default: bf16 where native on the machine) | float32 | mixed_bfloat16.",
    ),
    feature_cache: str = typer.Option(
        None,
        help="auto (default: compute a pretrained backbone's frozen part once per study, for "
        "trials that freeze it) | off (every trial trains from images).",
    ),
    workers: int = typer.Option(
        None, help="Final-job workers besides the chief (local default 1)."
    ),
    replicas: int = typer.Option(None, hidden=True, help="Renamed --workers: refused."),
    trial_accelerators: int = typer.Option(
        None,
        help="Accelerators per trial. Without a GPU here they are logical CPU devices, "
        "each taking a share of the batch under MirroredStrategy (local default 2).",
    ),
    search_space: Path = typer.Option(
        None,
        help=f"Search-space preset ({PRESETS}) or a YAML file (default: the model's own).",
    ),
    objectives: str = typer.Option(
        None,
        help="Metrics to optimise, comma-separated, the first primary (default val_accuracy); "
        "goals from the trainer's table, name:max|min for a team's own.",
    ),
    constraint: list[str] = typer.Option(
        None, help="A bound the picked trial meets, e.g. 'val_loss<=0.5' (repeatable)."
    ),
    early_stopping: bool = typer.Option(
        False,
        "--early-stopping",
        help="Stop trials that trail the median of the finished ones (default: off).",
    ),
    trial_threshold: float = typer.Option(None, help="Stop before final training below it."),
    eval_threshold: float = typer.Option(
        None, help="Register only at or above this test_accuracy."
    ),
    seed: int = typer.Option(None, help="Seed for splits, search and training."),
    max_bad_fraction: float = typer.Option(
        None, help="Share of unreadable images skipped (listed) before the data step fails."
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Show the steps' tracebacks too."),
    continue_from: str = typer.Option(None, help=CONTINUE_HELP),
    output: str = typer.Option(None, help="Run directory (default runs/latest)."),
    registry: str = typer.Option(None, help="Local model registry (default runs/registry)."),
    config: Path = typer.Option(None, help="YAML settings file."),
) -> None:
    """Run the whole pipeline here: prepare → tune → select → train → evaluate → register."""
    if replicas is not None:
        fail(str(renamed("replicas", "flag")))
    notes: list[str] = []
    settings = _settings(
        config,
        LOCAL_RUN_DEFAULTS,
        local=True,
        notes=notes,
        source=source,
        image_size=image_size,
        max_trials=max_trials,
        parallel_trials=parallel_trials,
        max_failed_trials=max_failed_trials,
        algorithm=algorithm,
        model=model,
        weights=weights,
        epochs=epochs,
        batch_size=batch_size,
        precision=precision,
        feature_cache=feature_cache,
        workers=workers,
        trial_accelerator_count=trial_accelerators,
        search_space=str(search_space) if search_space else None,
        objectives=objectives,
        constraints=constraint or None,
        early_stopping=early_stopping or None,  # absent: the config's or the environment's
        trial_threshold=trial_threshold,
        eval_threshold=eval_threshold,
        seed=seed,
        max_bad_fraction=max_bad_fraction,
        continue_from=continue_from,
        output=output,
        registry=registry,
    )
    notes += continuation_lines(settings, "local")
    notes += _preflight(settings)
    from rich.console import Console

    from pipelines import ownership
    from pipelines.app import interrupts, local_run, run_summary
    from pipelines.settings_space import study_space
    from pipelines.study.model_choice import models_of

    console = Console(file=sys.stdout)  # the real stdout: the run redirects sys.stdout
    choice = models_of(study_space(settings))  # a model choice: each trial's own model
    model = f"{'|'.join(choice)} (searched)" if choice else settings.model

    def announce() -> None:  # once the output is this run's: a refusal stays one line
        console.print(
            f"[bold]hpt-pipeline run[/]: model={model} source={settings.source} "
            f"image_size={settings.image_size} trials={settings.max_trials} "
            f"(parallel {settings.parallel_trials}) epochs={settings.epochs} "
            f"final job=1 chief + {settings.workers} worker(s) → {settings.output}"
        )
        for note in notes:
            console.out(note if note.startswith("warning") else f"note: {note}")

    try:
        result = local_run.run_local(
            settings,
            echo=console.out,
            announce=announce,
            # The default output starts a fresh study when the settings changed (README's
            # second command); an output the user named keeps its study or is refused.
            fresh_when_different=output is None and settings.output == Settings.output,
            verbose=verbose,
        )
    except (ownership.BusyError, SettingsError) as err:  # another run owns it; another study
        fail(str(err))
    except KeyboardInterrupt as err:
        console.out(interrupted_line(Path(settings.output)))
        raise typer.Exit(interrupts.exit_code(err)) from None
    except RuntimeError as err:  # kfp.local: a task failed
        log = Path(settings.output) / local_run.LOG_FILE
        reason = local_run.failure_reason(log) or " ".join(str(err).split())[:300]
        fail(f"{reason} (full log: {log}{scratch.notes(err)})")
    run_summary.show(console, result)


def interrupted_line(output: Path) -> str:
    """What the screen says when a run is interrupted: trials done, and how to resume."""
    from pipelines.app import study_identity

    counts = study_identity.trial_counts(output / study_identity.STUDY_DIR) or {"done": 0}
    return (
        f"interrupted: {counts['done']} trial(s) done, rerun the same command to resume "
        f"(--output {output})"
    )


def compile_command(
    target: str = typer.Option("local", help="local | vertex | kubeflow"),
    output: Path = typer.Option(..., help="Where to write the pipeline spec YAML."),
    config: Path = typer.Option(None, help="YAML settings file."),
    continue_from: str = typer.Option(None, help=CONTINUE_HELP),
) -> None:
    """Compile the pipeline for a target into a pipeline spec (YAML)."""
    from pipelines.compiler import compile_pipeline
    from pipelines.wiring import TARGETS

    if target not in TARGETS:
        fail(f"--target={target}: expected one of {', '.join(TARGETS)}")
    settings = _settings(config, None, local=target == "local", continue_from=continue_from)
    for line in continuation_lines(settings, target):
        typer.echo(f"note: {line}")
    try:
        if target != "local":  # a cloud spec with placeholder images would fail at its first pull
            from pipelines.app.preflight import check_images

            check_images(settings, "set {env} (or {name} in --config) to the pushed image")
        path = compile_pipeline(target, settings, output)
    except SettingsError as err:  # a setting the target cannot honour
        fail(str(err))
    typer.echo(f"compiled the {target} pipeline to {path}")


def models(
    registry: str = typer.Option("runs/registry", help="Local model registry folder."),
    format: str = typer.Option(
        "table", "--format", help="table | csv | json (the registry's model cards)."
    ),
) -> None:
    """List the models in the local registry (newest version last)."""
    from rich.table import Table

    from pipelines.app import formats
    from pipelines.targets.local import registry as registry_lib

    formats.check_format(format)
    cards = registry_lib.list_models(registry)
    if format == "json":
        typer.echo(formats.json_text(cards), nl=False)
        return
    if not cards and format == "table":
        typer.echo(f"no models registered in {registry}")
        return
    columns = (
        "model",
        "version",
        "registered",
        "test_accuracy",
        "best trial",
        "dataset",
        "run",
        "study",
        "path",
    )
    rows = []
    for card in cards:
        accuracy = card.get("metrics", {}).get("test_accuracy")
        lineage = card.get("lineage", {})
        rows.append(
            (
                card["name"],
                f"v{card['version']}",
                card["registered_at"][:19],
                f"{accuracy:.4f}" if isinstance(accuracy, float) else "-",
                str(lineage.get("best_trial_id", "-")),
                str(lineage.get("dataset_source") or "-"),
                Path(lineage["run"]).name if lineage.get("run") else "-",
                str(lineage.get("study") or "-"),
                card["path"],
            )
        )
    if format == "csv":
        typer.echo(formats.csv_text(columns, rows), nl=False)
        return
    table = Table(title=f"models in {registry}")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    formats.print_table(table)
