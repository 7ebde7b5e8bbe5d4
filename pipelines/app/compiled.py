"""What a cloud command sends: the `--template` given, or the target compiled now."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pipelines.settings import Settings, SettingsError


@contextlib.contextmanager
def compiled_template(template: Path | None, settings: Settings, target: str) -> Iterator[Path]:
    """`template` (made for `target`, else refused), or `target` compiled from `settings`.

    Raises:
        SettingsError: `template` was compiled for another target (`templates.check_target`).
    """
    if template is not None:
        from pipelines.templates import check_target

        check_target(template, target)
        yield template
        return
    from pipelines.compiler import compile_pipeline

    with tempfile.TemporaryDirectory(prefix="hpt-pipeline-") as tmp:
        yield Path(compile_pipeline(target, settings, str(Path(tmp) / "pipeline.yaml")))


def check_output(output: Path | None, dry_run: bool) -> None:
    """Refuse `--output` without `--dry-run` (only a dry run writes a request).

    Raises:
        SettingsError: Naming the output.
    """
    if output is not None and not dry_run:
        raise SettingsError(f"--output={output}: only used with --dry-run")
