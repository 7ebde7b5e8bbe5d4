"""Run the `local` target end to end with kfp.local, and summarise what it produced."""

import contextlib
import io
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pipelines import ownership, scratch
from pipelines.app import interrupts, study_identity
from pipelines.jobs import fork_client
from pipelines.lineage.local import SPEC_FILE, task_outputs
from pipelines.plan import RunPlan, resolve
from pipelines.settings import Settings
from pipelines.targets.local.cli import preflight as local_preflight

LOG_FILE = "pipeline.log"
LOCK_FILE = "run.lock"  # held by the run that owns the output (`pipelines.ownership`)
TMP_DIR = "tmp"  # the run's temporary files: <output>/tmp/run-XXXX while it runs
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Component output that is TensorFlow's and absl's chatter, kept in the log file only:
# absl-format lines of level I, W or E (`I0000 00:00:1795.. 15002 port.cc:153] oneDNN ..`,
# "Local rendezvous is aborting", a replica's gRPC teardown after the chief is gone), the
# older `2026-01-01 09:00:00.000000: W tensorflow/..` format, and the known start-up lines.
# Fatal (F) lines stay: they are why a process died. A line may carry a replica's
# `[chief-0] ` tag, forwarded by the local job executor.
_TF_NOISE = re.compile(
    r"^(?:\[[\w-]+\] )?(?:"
    r"[IWE]\d{4} \d+:\d+:\d+\.\d+ +\d+ [\w.-]+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] "
    r"|WARNING: All log messages before absl::InitializeLog"
    r"|To enable the following instructions: .*rebuild TensorFlow"
    r"|Additional GRPC error information from remote target"
    r"|:UNKNOWN:Error received from peer"
    r"|Input file read error"
    r")|oneDNN custom operations|cpu_feature_guard|Local rendezvous is aborting"
)


def is_tf_noise(line: str) -> bool:
    """Whether a line of task output is TensorFlow's or absl's chatter (log file only)."""
    return bool(_TF_NOISE.search(_ANSI.sub("", line).strip()))


_TASK = re.compile(r"'([^']+)'")


class ProgressFilter(io.TextIOBase):
    """A stdout stand-in: everything goes to the log file, progress lines also to `echo`.

    kfp.local prints each task's start, its streamed output, its outputs (long
    artifact dumps) and its end. The terminal gets one line per task start and
    end, and the tasks' own output (trial and epoch progress) minus TensorFlow's
    start-up chatter; the dumps stay in the log file.
    """

    def __init__(self, log: Any, echo: Callable[[str], None], *, tracebacks: bool = False):
        self.log, self.echo, self.pending, self.state = log, echo, "", "idle"
        self.json_depth: int | None = None
        self.tracebacks = tracebacks  # a task's tracebacks on screen too (`--verbose`)
        self.in_traceback = False

    def write(self, text: str) -> int:
        """Log `text`; echo its complete progress lines."""
        self.log.write(text)
        self.log.flush()
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self._line(_ANSI.sub("", line).rstrip())
        return len(text)

    def _line(self, line: str) -> None:
        if self.json_depth is not None:  # skip the executor's JSON dump of its inputs
            self.json_depth += sum(line.count(c) for c in "{[") - sum(line.count(c) for c in "}]")
            if self.json_depth <= 0:
                self.json_depth = None
            return
        if "[KFP Executor" in line:
            if "Got executor_input" in line:
                self.json_depth = 0
            return
        task = _TASK.search(line)
        name = task[1] if task else ""
        if "Executing task" in line:
            self.state = "task"
            self.echo(f"▶ {name}")
        elif "Streamed logs:" in line:
            self.state = "logs"
        elif "finished with status" in line:
            self.state = "task"
            status = line.rsplit("status", 1)[-1].strip()
            self.echo(f"{'✓' if status == 'SUCCESS' else '✗'} {name} {status.lower()}")
        elif line.endswith("outputs:") or line.endswith("has no outputs"):
            self.state = "outputs"
        elif set(line) == {"-"}:
            self.state = "idle"
        elif self.state == "logs" and line.strip() and not is_tf_noise(line):
            if not self.tracebacks and self._traceback_line(line.strip()):
                return
            self.echo(f"    {line.strip()}")

    def _traceback_line(self, line: str) -> bool:
        """Whether `line` belongs to a traceback (through its exception line): log only.

        The run's error line says the step's own reason once, with the log's path.
        """
        if line.startswith("Traceback (most recent call last):"):
            self.in_traceback = True
        elif self.in_traceback and _ERROR.match(line):
            self.in_traceback = False
            return True
        return self.in_traceback or line.startswith("During handling of the above exception")


_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$")
_WRAPPERS = ("RuntimeError", "StepProcessError")  # say only that a step's process failed


def failure_reason(log_path: Path) -> str | None:
    """The last exception line a failed task printed (e.g. `SelectionError: ...`).

    A step's own error wins over the wrapper that says its process exited
    (`StepProcessError: python -m dataprep.prepare exited with 1`).
    """
    if not log_path.is_file():
        return None
    matches = [_ERROR.match(line) for line in log_path.read_text(errors="replace").splitlines()]
    found = [m for m in matches if m and m[1] not in _WRAPPERS]
    return f"{found[-1][1]}: {found[-1][2]}" if found else None


def latest_run_dir(artifacts_root: Path, before: set[Path]) -> Path:
    """The run folder kfp.local created under the pipeline root."""
    new = [p for p in artifacts_root.iterdir() if p.is_dir() and p not in before]
    if not new:
        raise RuntimeError(f"{artifacts_root}: kfp.local wrote no run folder")
    return max(new, key=lambda p: p.stat().st_mtime)


def run_local(
    plan: RunPlan | Settings,
    echo: Callable[[str], None] | None = None,
    announce: Callable[[], None] | None = None,
    *,
    fresh_when_different: bool = False,
    verbose: bool = False,
) -> dict[str, Any]:
    """Run the whole pipeline of `plan` on this machine; return a summary of the run.

    Settings given instead of the plan are resolved here (`pipelines.plan.resolve`).
    Artifacts go to `<output>/artifacts/<run>/`, the study to `<output>/study/`
    (a rerun with the same output resumes it), registered models to
    `settings.registry`, and the full log to `<output>/pipeline.log`. Progress
    lines go to `echo` (default: this process's stdout, captured before the run);
    `announce` is called once the output is this run's, before any progress.

    The run owns its output (`<output>/run.lock`), keeps its temporary files in
    `<output>/tmp/` (kept and named when it fails), resumes the study only when the
    settings that define it are the same (`study_identity`), and stops on SIGTERM and
    SIGHUP as on Ctrl-C: docs/local-run.md, "The local run, in detail".
    `fresh_when_different` (the default output): a study of other settings is kept
    beside the new one instead of refused. A step's traceback stays in the log unless
    `verbose`.

    Raises:
        ownership.BusyError: Another run holds the output.
        study_identity.StudyMismatch: The output holds a study of other settings.
        KeyboardInterrupt: The run was interrupted (`interrupts.RunInterrupted` for a
            signal); its steps have recorded their trials for a resume.
    """
    plan = plan if isinstance(plan, RunPlan) else resolve(plan)
    settings = plan.settings
    terminal = sys.stdout
    echo = echo or (lambda line: print(line, file=terminal, flush=True))
    output = Path(settings.local.output).resolve()
    with ownership.owned(str(output / LOCK_FILE), f"--output={settings.local.output}"):
        resumed = study_identity.check_and_record(
            plan, output, fresh_when_different=fresh_when_different
        )
        if announce is not None:
            announce()
        if resumed:
            echo(resumed)
        return _owned_run(plan, output, echo, verbose)


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """`name=value` in this process's environment (and its children's) for the block."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _owned_run(
    plan: RunPlan, output: Path, echo: Callable[[str], None], verbose: bool = False
) -> dict[str, Any]:
    """`run_local` once the output is this run's."""
    settings = plan.settings
    artifacts = output / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    registry = Path(settings.local.registry).resolve()
    before = set(artifacts.iterdir())
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with (
        # TFDS datasets are kept in the output unless the user chose a folder (never $HOME).
        _environ(
            local_preflight.TFDS_DATA_ENV, local_preflight.tfds_data_dir(settings.local.output)
        ),
        scratch.process_tmpdir(output / TMP_DIR, prefix="run-"),
        # Started first: it preloads TensorFlow while this process imports kfp (0.35 s)
        # and builds the pipeline.
        fork_client.shared_for_children(log_path=str(output / fork_client.LOG_FILE)) as server,
    ):
        from pipelines.compiler import write_spec
        from pipelines.pipeline import build_pipeline

        keep = {server.process.pid} if server is not None and server.process else set()
        tracking_uri = local_preflight.tracking_uri(settings)
        dataset = study_identity.dataset_home(plan, output)
        pipeline = build_pipeline("local", plan)
        with interrupts.forwarded(keep) as signalled:
            try:
                _run(pipeline, artifacts, output, registry, echo, verbose, tracking_uri, dataset)
            except KeyboardInterrupt:  # the steps record their trials before the server goes
                steps = signalled or [p for p in interrupts.children() if p not in keep]
                interrupts.wait_for(steps)
                raise
    run_dir = latest_run_dir(artifacts, before)
    write_spec(pipeline, "local", run_dir / SPEC_FILE)  # the DAG it ran, for lineage
    return {
        "trial_report": write_trial_report(run_dir),
        "run_dir": str(run_dir),
        "log": str(output / LOG_FILE),
        "seconds": time.perf_counter() - started,
        "tasks": task_outputs(run_dir),
    }


def write_trial_report(run_dir: Path) -> str | None:
    """The run's trial report, as `hpt-pipeline trials RUN` writes it; its page (None: none)."""
    from pipelines.reports import trial_report

    try:
        study = trial_report.load_trials(str(run_dir))
    except trial_report.ReportError:  # the run stopped before its study
        return None
    if not study.trials:
        return None
    metric = trial_report.resolve_metric(study, None, None)
    folder = trial_report.default_report_dir(study)
    return str(trial_report.write_report(study, folder, metric).page)


def _run(
    pipeline: Any,
    artifacts: Path,
    output: Path,
    registry: Path,
    echo: Callable[[str], None],
    verbose: bool = False,
    tracking_uri: str = "",
    dataset_dir: Path | None = None,
) -> None:
    """Run `pipeline` with kfp.local, its output filtered into the log and `echo`."""
    from kfp import local

    with (
        warnings.catch_warnings(),
        open(output / LOG_FILE, "a", encoding="utf-8") as log,
        contextlib.redirect_stdout(ProgressFilter(log, echo, tracebacks=verbose)),
    ):
        # kfp.local warns that display names and the components image are not used here.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=str(artifacts),
            raise_on_error=True,
        )
        pipeline(
            study_dir=str(study_identity.study_home(output)),  # never moves: lineage stays true
            registry_dir=str(registry),
            features_dir=str(output / "features"),  # keyed entries: a rerun reuses them
            dataset_dir=str(dataset_dir or ""),  # keyed: a rerun reuses or resumes it
            tracking_uri=tracking_uri,  # the setting, else the run folder's SQLite store
        )
