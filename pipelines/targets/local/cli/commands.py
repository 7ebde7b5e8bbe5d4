"""Commands that work on this machine: `run` (the local pipeline) and `models`.

`run` is the `local` target's command; its preflight is the one the target registry
names (`pipelines.wiring.TARGETS["local"]`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines import scratch
from pipelines.app.continuing import CONTINUE_HELP, continuation_lines
from pipelines.app.errors import fail
from pipelines.app.pipeline_settings import TRIAL_WORKERS_HELP, checked_settings
from pipelines.plan import RunPlan
from pipelines.settings import (
    LOCAL_RUN_DEFAULTS,
    REGISTRY_DIR,
    Settings,
    SettingsError,
    renamed,
)
from pipelines.study.search_space import preset_names

PRESETS = ", ".join(preset_names())  # the preset files, for the help text


def _option(help: str, *names: str, **kwargs: Any) -> Any:
    return typer.Option(*names, help=help, **kwargs)


SourceOption = Annotated[
    str | None, _option("'sample' (default), 'tfds:<name>' or an image folder.")
]
ImageSizeOption = Annotated[int | None, _option("Image side in pixels (local default 32).")]
MaxTrialsOption = Annotated[int | None, _option("Trials in the study (local default 4).")]
ParallelOption = Annotated[int | None, _option("Trials at once (local default 2).")]
MaxFailedOption = Annotated[
    int | None,
    _option("Failed trials that fail the study (as on Vertex); 0 lets the service decide."),
]
AlgorithmOption = Annotated[
    str | None,
    _option(
        "Search algorithm: GRID_SEARCH, RANDOM_SEARCH, or the default "
        "ALGORITHM_UNSPECIFIED (Vertex's own; TPE here)."
    ),
]
ModelOption = Annotated[
    str | None,
    _option(
        "cnn (default), resnet50, mobilenet_v3_small, or your own builder as "
        "package.module:function."
    ),
]
WeightsOption = Annotated[
    str | None, _option("imagenet | none | a Keras weights file (default: the model's own).")
]
EpochsOption = Annotated[int | None, _option("Epochs per trial and for the final job.")]
BatchSizeOption = Annotated[int | None, _option("Per-replica batch size.")]
PrecisionOption = Annotated[
    str | None,
    _option("auto (default: bf16 where native on the machine) | float32 | mixed_bfloat16."),
]
FeatureCacheOption = Annotated[
    str | None,
    _option(
        "auto (default: compute a pretrained backbone's frozen part once per study, for "
        "trials that freeze it) | off (every trial trains from images)."
    ),
]
WorkersOption = Annotated[
    int | None, _option("Final-job workers besides the chief (local default 1).")
]
TrialWorkersOption = Annotated[int | None, _option(TRIAL_WORKERS_HELP)]
ReplicasOption = Annotated[int | None, _option("Renamed --workers: refused.", hidden=True)]
TrialAcceleratorsOption = Annotated[
    int | None,
    _option(
        "Accelerators per trial. Without a GPU here they are logical CPU devices, "
        "each taking a share of the batch under MirroredStrategy (local default 2)."
    ),
]
SearchSpaceOption = Annotated[
    Path | None,
    _option(f"Search-space preset ({PRESETS}) or a YAML file (default: the model's own)."),
]
ObjectivesOption = Annotated[
    str | None,
    _option(
        "Metrics to optimise, comma-separated, the first primary (default val_accuracy); "
        "goals from the trainer's table, name:max|min for a team's own."
    ),
]
ConstraintOption = Annotated[
    list[str] | None,
    _option("A bound the picked trial meets, e.g. 'val_loss<=0.5' (repeatable)."),
]
EarlyStoppingOption = Annotated[
    bool,
    _option(
        "Stop trials that trail the median of the finished ones (default: off).",
        "--early-stopping",
    ),
]
SchedulerOption = Annotated[
    str | None,
    _option(
        "none (default) | median (= --early-stopping) | asha | hyperband: successive halving "
        "stops trials at rungs min_epochs·η^k and promotes one in η; the top rung is --epochs."
    ),
]
MinEpochsOption = Annotated[int | None, _option("Successive halving's first rung (default 1).")]
ReductionFactorOption = Annotated[
    int | None, _option("Successive halving's η: one trial in η promoted per rung (default 3).")
]
TrialThresholdOption = Annotated[float | None, _option("Stop before final training below it.")]
EvalThresholdOption = Annotated[
    float | None, _option("Register only at or above this test_accuracy.")
]
SeedOption = Annotated[int | None, _option("Seed for splits, search and training.")]
MaxBadOption = Annotated[
    float | None,
    _option("Share of unreadable images skipped (listed) before the data step fails."),
]
RECORD_FORMAT_HELP = (
    "How prepared images are stored: auto (default: by size) | raw | encoded (JPEG)."
)
PREPARE_WORKERS_HELP = "Shard tasks the data step runs at once (default 1: one process)."
RecordFormatOption = Annotated[str | None, _option(RECORD_FORMAT_HELP)]
PrepareWorkersOption = Annotated[int | None, _option(PREPARE_WORKERS_HELP)]
VerboseOption = Annotated[bool, _option("Show the steps' tracebacks too.", "--verbose")]
ContinueFromOption = Annotated[str | None, _option(CONTINUE_HELP)]
OutputOption = Annotated[str | None, _option("Run directory (default runs/latest).")]
RegistryOption = Annotated[str | None, _option("Local model registry (default <output>/registry).")]
ConfigOption = Annotated[Path | None, _option("YAML settings file.")]
TrackingOption = Annotated[
    str | None,
    _option(
        "auto (default: MLflow runs in <output>/mlflow.db, or at --tracking-uri; an "
        "unreachable server is said and the run goes on) | mlflow (the same, refused when "
        "unreachable) | off."
    ),
]
TrackingUriOption = Annotated[
    str | None, _option("MLflow tracking URI (default: sqlite:///<output>/mlflow.db).")
]
# Flags whose Settings field has another name; `run`'s other flags name their field.
RUN_FIELDS = {"trial_accelerators": "trial_accelerator_count", "constraint": "constraints"}
NOT_SETTINGS = ("replicas", "verbose", "config")


def run(
    ctx: typer.Context,
    source: SourceOption = None,
    image_size: ImageSizeOption = None,
    max_trials: MaxTrialsOption = None,
    parallel_trials: ParallelOption = None,
    max_failed_trials: MaxFailedOption = None,
    algorithm: AlgorithmOption = None,
    model: ModelOption = None,
    weights: WeightsOption = None,
    epochs: EpochsOption = None,
    batch_size: BatchSizeOption = None,
    precision: PrecisionOption = None,
    feature_cache: FeatureCacheOption = None,
    workers: WorkersOption = None,
    replicas: ReplicasOption = None,
    trial_workers: TrialWorkersOption = None,
    trial_accelerators: TrialAcceleratorsOption = None,
    search_space: SearchSpaceOption = None,
    objectives: ObjectivesOption = None,
    constraint: ConstraintOption = None,
    early_stopping: EarlyStoppingOption = False,
    scheduler: SchedulerOption = None,
    min_epochs: MinEpochsOption = None,
    reduction_factor: ReductionFactorOption = None,
    trial_threshold: TrialThresholdOption = None,
    eval_threshold: EvalThresholdOption = None,
    seed: SeedOption = None,
    max_bad_fraction: MaxBadOption = None,
    record_format: RecordFormatOption = None,
    prepare_workers: PrepareWorkersOption = None,
    verbose: VerboseOption = False,
    continue_from: ContinueFromOption = None,
    output: OutputOption = None,
    registry: RegistryOption = None,
    tracking: TrackingOption = None,
    tracking_uri: TrackingUriOption = None,
    config: ConfigOption = None,
) -> None:
    """Run the whole pipeline here: prepare → tune → select → train → evaluate → register."""
    if replicas is not None:
        fail(str(renamed("replicas", "flag")))
    notes: list[str] = []
    plan = checked_settings(
        config, LOCAL_RUN_DEFAULTS, runs_here=True, notes=notes, **run_fields(ctx.params)
    )
    notes += continuation_lines(plan, "local")
    notes += _preflight(plan)
    # The default output starts a fresh study when the settings changed (README's second
    # command); an output the user named keeps its study or is refused.
    fresh = output is None and plan.settings.local.output == Settings.default("output")
    _run(plan, notes, fresh_when_different=fresh, verbose=verbose)


def run_fields(params: Mapping[str, Any]) -> dict[str, Any]:
    """`run`'s flags as Settings fields (None: unset, so the config's or the environment's)."""
    fields = {
        RUN_FIELDS.get(name, name): value
        for name, value in params.items()
        if name not in NOT_SETTINGS
    }
    search_space = fields["search_space"]
    fields["search_space"] = str(search_space) if search_space else None
    fields["constraints"] = fields["constraints"] or None
    fields["early_stopping"] = fields["early_stopping"] or None
    return fields


def preflight(settings: Settings) -> list[str]:
    """Refuse, in one line, a run that would fail late on this machine; return its notes.

    Raises:
        SettingsError: Spot or flex-start capacity, too little memory or disk, TFDS or
            gs:// unreachable, an output or registry that cannot be written, weights that do
            not load, an MLflow store that `tracking=mlflow` cannot reach.
    """
    from pipelines.app import gcs_access
    from pipelines.targets.local.cli import preflight as local_preflight
    from pipelines.targets.local.wiring import check_settings

    check_settings(settings)  # what the target cannot honour, as compile refuses it
    local_preflight.check_memory(settings)
    gcs_images = gcs_access.check_gcs(settings)  # first: it refuses a gs:// output
    local_preflight.check_writable("output", settings.local.output)
    local_preflight.check_writable("registry", settings.local.registry)
    local_preflight.check_tfds_reachable(
        settings.data.source, local_preflight.tfds_data_dir(settings.local.output)
    )
    disk_note = local_preflight.check_disk(settings, gcs_images=gcs_images)
    local_preflight.check_weights_load(settings)
    notes = [disk_note] if disk_note else []
    local_preflight.check_tracking(settings, say=notes.append)
    return notes


def _preflight(plan: RunPlan) -> list[str]:
    """The local target's preflight (`TARGETS["local"]`), exit 2 on a refusal; the notes."""
    from pipelines.app import dispatch
    from pipelines.targets.local.cli import preflight as local_preflight
    from pipelines.wiring import TARGETS

    settings = plan.settings
    try:
        notes = dispatch.preflight(TARGETS["local"], settings) or []
    except SettingsError as err:
        fail(str(err))
    from pipelines.settings_space import weights_warning

    warnings = [
        local_preflight.replica_warning(settings),
        weights_warning(settings, plan.known, plan.space),
    ]
    return [*notes, *(w for w in warnings if w)]


def _announcer(console: Any, plan: RunPlan, notes: list[str]) -> Callable[[], None]:
    """What prints the run's first line and its notes, once the output is this run's."""
    settings = plan.settings
    model = plan.model_line  # a model choice: each trial's own model

    workers = settings.training.trial_workers
    trial_cluster = f", each 1 chief + {workers} worker(s)" if workers else ""

    def announce() -> None:  # once the output is this run's: a refusal stays one line
        console.print(
            f"[bold]hpt-pipeline run[/]: model={model} source={settings.data.source} "
            f"image_size={settings.data.image_size} trials={settings.study.max_trials} "
            f"(parallel {settings.study.parallel_trials}{trial_cluster}) "
            f"epochs={settings.training.epochs} "
            f"final job=1 chief + {settings.training.workers} worker(s) → {settings.local.output}"
        )
        for note in notes:
            console.out(note if note.startswith("warning") else f"note: {note}")

    return announce


def _run(plan: RunPlan, notes: list[str], *, fresh_when_different: bool, verbose: bool) -> None:
    """Run the pipeline with kfp.local and show its summary; every failure is one line."""
    from rich.console import Console

    from pipelines import ownership
    from pipelines.app import interrupts, run_summary
    from pipelines.targets.local.cli import run as local_run

    console = Console(file=sys.stdout)  # the real stdout: the run redirects sys.stdout
    settings = plan.settings
    try:
        result = local_run.run_local(
            plan,
            echo=console.out,
            announce=_announcer(console, plan, notes),
            fresh_when_different=fresh_when_different,
            verbose=verbose,
        )
    except (ownership.BusyError, SettingsError) as err:  # another run owns it; another study
        fail(str(err))
    except KeyboardInterrupt as err:
        console.out(interrupted_line(Path(settings.local.output)))
        raise typer.Exit(interrupts.exit_code(err)) from None
    except RuntimeError as err:  # kfp.local: a task failed
        log = Path(settings.local.output) / local_run.LOG_FILE
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


def models(
    registry: str = typer.Option(
        None, help="Local model registry folder (default <output>/registry)."
    ),
    output: str = typer.Option(
        Settings.default("output"), help="The run directory whose registry to list."
    ),
    format: str = typer.Option(
        "table", "--format", help="table | csv | json (the registry's model cards)."
    ),
) -> None:
    """List the models in the local registry (newest version last)."""
    from rich.table import Table

    from pipelines.app import formats
    from pipelines.targets.local import registry as registry_lib

    formats.check_format(format)
    registry = registry or str(Path(output) / REGISTRY_DIR)
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
    rows = [_card_row(card) for card in cards]
    if format == "csv":
        typer.echo(formats.csv_text(columns, rows), nl=False)
        return
    table = Table(title=f"models in {registry}")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    formats.print_table(table)


def _card_row(card: dict[str, Any]) -> tuple[str, ...]:
    """One registered version as `models` lists it."""
    accuracy = card.get("metrics", {}).get("test_accuracy")
    lineage = card.get("lineage", {})
    return (
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
