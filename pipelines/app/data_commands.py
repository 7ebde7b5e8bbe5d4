"""`hpt-pipeline prepare`: prepare a dataset once for every trial and the final job."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from pipelines import scratch
from pipelines.app import formats, native_log
from pipelines.app.errors import fail, first_line
from pipelines.targets.local.cli.commands import PREPARE_WORKERS_HELP, RECORD_FORMAT_HELP
from trainer.contract import MIN_IMAGE_SIZE, PREPARATION

RecordFormat = Annotated[str, typer.Option(help=RECORD_FORMAT_HELP)]
PrepareWorkers = Annotated[int, typer.Option(help=PREPARE_WORKERS_HELP)]

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def prepare(
    source: str = typer.Option(
        ..., help="'sample', 'tfds:<name>' or an image folder (<class>/* or <split>/<class>/*)."
    ),
    output: str = typer.Option(..., help="Directory to create (local or gs://)."),
    image_size: int = typer.Option(
        PREPARATION.image_size, help=f"Side of the square images, >= {MIN_IMAGE_SIZE}."
    ),
    validation_fraction: float = typer.Option(
        PREPARATION.validation_fraction,
        help="Share of train carved out as validation when the source has none.",
    ),
    test_fraction: float = typer.Option(
        PREPARATION.test_fraction,
        help="Share of train carved out as test when the source has none.",
    ),
    seed: int = typer.Option(PREPARATION.seed, help="Seed of the split membership and order."),
    channels: int = typer.Option(PREPARATION.channels, help="1 (greyscale) or 3 (RGB)."),
    max_bad_fraction: float = typer.Option(
        PREPARATION.max_bad_fraction, help="Share of unreadable images skipped before failing."
    ),
    record_format: RecordFormat = PREPARATION.record_format,
    prepare_workers: PrepareWorkers = PREPARATION.prepare_workers,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty --output."),
) -> None:
    """Prepare a dataset once: decode, resize and shard it for every trial and the final job."""
    from rich.console import Console

    if source.startswith("gs://"):  # credentials and access, before TensorFlow's slow probe
        _check_gcs_source(source)
    # TensorFlow's C++ start-up and chatter (fd 2) go to a log beside the output, temp files too.
    beside = _beside(output)
    log = native_log.new_log_file(beside.with_name(f"{beside.name}.prepare.log"))
    try:
        with scratch.process_tmpdir(beside.parent, prefix=f".{beside.name}.tmp-"):
            with native_log.stderr_to_file(log):  # importing TensorFlow prints its start-up lines
                from dataprep.prepare import prepare_dataset
            with (
                native_log.stderr_to_file(log) as terminal,
                _progress(Console(file=terminal)) as show,
            ):
                metadata = prepare_dataset(
                    source,
                    output,
                    image_size=image_size,
                    validation_fraction=validation_fraction,
                    test_fraction=test_fraction,
                    seed=seed,
                    channels=channels,
                    max_bad_fraction=max_bad_fraction,
                    record_format=record_format,
                    prepare_workers=prepare_workers,
                    overwrite=overwrite,
                    progress=show,
                    say=lambda line: print(line, file=terminal, flush=True),  # with progress
                )
    except (Exception, KeyboardInterrupt) as error:
        _fail_on_known(error, log, output)
        raise
    _report(output, metadata, log)


def _interrupted(output: str) -> NoReturn:
    """Exit 130 saying where the finished shards are kept and how to go on from them."""
    from trainer.staging import resumable_stage

    fail(
        f"interrupted; the shards finished so far are kept in {resumable_stage(output)}: rerun "
        "the same command to write only the others",
        130,
    )


def _check_gcs_source(source: str) -> None:
    """Refuse (one line) a gs:// source this machine cannot read."""
    from pipelines.app import gcs_access

    try:
        gcs_access.check_values([f"--source={source}"])
    except gcs_access.GcsAccessError as err:
        fail(str(err))


def _fail_on_known(error: BaseException, log: Path, output: str) -> None:
    """Exit with one line for a preparation or I/O error or an interrupt; return for others."""
    from dataprep.prepare import IO_ERRORS, PreparationError

    if isinstance(error, KeyboardInterrupt):
        _interrupted(output)

    if isinstance(error, PreparationError):  # names the bad value (or unreadable files)
        log.unlink(missing_ok=True)
        fail(str(error) + scratch.notes(error))
    if isinstance(error, IO_ERRORS):  # TensorFlow may have logged more about it
        message = f"I/O error: {first_line(error)}{scratch.notes(error)}"
        fail(_with_log(message, native_log.keep_if_written(log)))


def _report(output: str, metadata: dict[str, Any], log: Path) -> None:
    """The prepared dataset's table, what was left out, and TensorFlow's log if it wrote one."""
    from dataprep.prepare import skipped_lines

    console = formats.print_table(_dataset_summary(output, metadata))
    for line in skipped_lines(metadata):  # what was left out, said (as under `run`)
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    kept = native_log.keep_if_written(log)
    if kept:
        console.print(f"TensorFlow's log: {kept}", style="dim", soft_wrap=True)


def _beside(output: str) -> Path:
    """Where the log and temporary files go: next to a local output, else in this folder."""
    if "://" in output:
        return Path.cwd() / (output.rstrip("/").rsplit("/", 1)[-1] or "dataset")
    return Path(output).resolve()


def _with_log(message: str, log: Path | None) -> str:
    """The one error line, naming TensorFlow's log when there is one."""
    return f"{message} (TensorFlow's log: {log})" if log else message


@contextlib.contextmanager
def _progress(console: Console) -> Iterator[Callable[[int, int], None]]:
    """Yield a progress callback: a Rich bar on a terminal, else a line per 10% of the images."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from dataprep.prepare import report_lines

    if not console.is_terminal:
        yield report_lines(console.print)
        return
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # Python-level writes to stderr (TensorFlow's warnings) stay out of the bar: to the log.
    progress = Progress(
        "Preparing images", *columns, console=console, transient=True, redirect_stderr=False
    )
    with progress as bar:
        task = bar.add_task("prepare", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _dataset_summary(output: str, metadata: dict[str, Any]) -> Table:
    """A Rich table of a prepared dataset: images per class and split, totals, shards."""
    from rich.table import Table

    splits = metadata["splits"]
    carved = [name for name, split in splits.items() if split["source_split"] != name]
    height, width, channels = metadata["image_shape"]
    table = Table(
        title=f"{output}: {height}x{width}x{channels} images",
        caption=f"{', '.join(carved) or 'no split'} carved out of train (seed {metadata['seed']}); "
        f"{len(metadata['skipped'])} unreadable images skipped",
    )
    table.add_column("class")
    for name in splits:
        table.add_column(name, justify="right")
    for class_name in metadata["class_names"]:
        table.add_row(
            class_name, *(str(split["per_class"][class_name]) for split in splits.values())
        )
    table.add_section()
    table.add_row("images", *(str(split["count"]) for split in splits.values()), style="bold")
    table.add_row("shards", *(str(len(split["shards"])) for split in splits.values()))
    return table
