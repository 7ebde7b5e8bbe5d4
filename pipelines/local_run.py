"""Run the `local` target end to end with kfp.local, and summarise what it produced."""

import contextlib
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.pipeline import build_pipeline
from pipelines.settings import Settings

LOG_FILE = "pipeline.log"
# Lines of kfp.local's own chatter that stay in the log file only.
_NOISE = ("[KFP Executor", "Got executor_input", "Wrote executor output", "Executor input:")


class ProgressFilter(io.TextIOBase):
    """A stdout stand-in: everything goes to the log file, progress lines also to `echo`.

    kfp.local prints each component's output and its own executor JSON dumps;
    the JSON (indented lines after an executor banner) is kept out of the terminal.
    """

    def __init__(self, log: Any, echo: Callable[[str], None]):
        self.log, self.echo, self.pending, self.in_dump = log, echo, "", False

    def write(self, text: str) -> int:
        """Log `text`; echo its complete progress lines."""
        self.log.write(text)
        self.log.flush()
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def _line(self, line: str) -> None:
        stripped = line.strip()
        if any(marker in line for marker in _NOISE):
            self.in_dump = True
            return
        if self.in_dump and (not stripped or stripped[0] in '{}[]"' or line.startswith("        ")):
            return
        self.in_dump = False
        if stripped:
            self.echo(line.rstrip())


def latest_run_dir(artifacts_root: Path, before: set[Path]) -> Path:
    """The run folder kfp.local created under the pipeline root."""
    new = [p for p in artifacts_root.iterdir() if p.is_dir() and p not in before]
    if not new:
        raise RuntimeError(f"{artifacts_root}: kfp.local wrote no run folder")
    return max(new, key=lambda p: p.stat().st_mtime)


def task_outputs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each task's executor output (parameter values and artifacts), by task folder name."""
    outputs = {}
    for path in sorted(run_dir.glob("*/executor_output.json")):
        outputs[path.parent.name] = json.loads(path.read_text())
    return outputs


def run_local(settings: Settings, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the whole pipeline on this machine; return a summary of the run.

    Artifacts go to `<output>/artifacts/<run>/`, the study to `<output>/study/`
    (a rerun with the same output resumes it), registered models to
    `settings.registry`, and the full log to `<output>/pipeline.log`.
    """
    from kfp import local

    output = Path(settings.output).resolve()
    artifacts = output / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    registry = Path(settings.registry).resolve()
    pipeline = build_pipeline("local", settings)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(artifacts),
        raise_on_error=True,
    )
    before = set(artifacts.iterdir())
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with (
        open(output / LOG_FILE, "a", encoding="utf-8") as log,
        contextlib.redirect_stdout(ProgressFilter(log, echo)),
    ):
        pipeline(study_dir=str(output / "study"), registry_dir=str(registry))
    run_dir = latest_run_dir(artifacts, before)
    return {
        "run_dir": str(run_dir),
        "log": str(output / LOG_FILE),
        "seconds": time.perf_counter() - started,
        "tasks": task_outputs(run_dir),
    }
