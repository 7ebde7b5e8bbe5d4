"""Run a Vertex custom job's `worker_pool_specs` on this machine: one process per replica.

Each replica gets the environment Vertex would give it (`pipelines.jobs.replica_env`), is
forked from a preloaded trainer when the job has a `fork_client.ForkServer` that accepts
it (else started afresh; its log's second line says which), logs to its own file echoed
with a `[chief-0]` style prefix, and keeps its temporary files under
`<log_dir>/tmp/<replica>/` (removed when the job ends well, kept and named when it fails).
As on Vertex, the job succeeds only when every replica exits 0, and one failure, a silent
replica or a timeout stops them all rather than leaving the job hanging. The details:
docs/local-run.md, "The local study and executor, as Vertex behaves".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines import scratch
from pipelines.jobs import fork_client, replica_env, replica_process

DEFAULT_GRACE_SECONDS = 5.0
DEFAULT_STARTUP_TIMEOUT = 300.0
LOG_TAIL_LINES = 25
LOG_WINDOW_BYTES = 64 * 1024  # how much of a log `head` and `tail` read
TMP_DIR = "tmp"  # replicas' temporary folders, under the job's log folder
PS_POOL = 2


class CustomJobError(RuntimeError):
    """A local custom job that failed; the first line names the replica and why.

    Attributes:
        replica: The replica that failed (`chief-0`, `worker-1`…), or None.
        log_tail: The last lines of that replica's log.
        exit_code: Its exit code (negative: killed by that signal), None if still running.
    """

    def __init__(
        self,
        message: str,
        replica: str | None = None,
        log_tail: str = "",
        exit_code: int | None = None,
    ):
        super().__init__(message + (f"\n{log_tail}" if log_tail else ""))
        self.summary = message
        self.replica = replica
        self.log_tail = log_tail
        self.exit_code = exit_code


@dataclasses.dataclass
class Replica:
    """One process of the job."""

    name: str
    pool_index: int
    replica_index: int
    argv: list[str]
    env: dict[str, str]
    log_path: str
    tmp_dir: str
    process: subprocess.Popen[bytes] | fork_client.ForkedProcess | None = None
    started_by: str = ""  # "fork" (from the preloaded trainer) or "exec"
    first_output_at: float | None = None
    exited_at: float | None = None
    reader: threading.Thread | None = None

    @property
    def returncode(self) -> int | None:
        """Exit code once it has exited (negative: killed by that signal)."""
        return None if self.process is None else self.process.poll()

    def wait_for_exit(self, seconds: float) -> None:
        """Return when it exits or after `seconds`, whichever comes first."""
        if self.process is None:
            time.sleep(seconds)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=seconds)


@dataclasses.dataclass(frozen=True)
class JobResult:
    """How a job ended when it did not fail."""

    stopped: bool
    elapsed_seconds: float
    exit_codes: dict[str, int | None]
    log_paths: dict[str, str]


def echo_to_stderr(line: str) -> None:
    """Default echo: the prefixed line on stderr."""
    print(line, file=sys.stderr, flush=True)


def job_local_dir(base_output_directory: str, trial_id: str | None = None) -> str:
    """Where the local executor keeps replica logs for a job or trial (`<root>/local`)."""
    root = posixpath.join(base_output_directory, trial_id) if trial_id else base_output_directory
    return posixpath.join(root, "local")


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _pool_command(spec: Any) -> list[str]:
    """The command line of a pool: container command + args, or `python -m module` + args."""
    if spec.container_spec.image_uri:
        command = list(spec.container_spec.command)
        if not command:
            raise CustomJobError(
                "container_spec.command is empty: the local executor cannot run an image's "
                "entrypoint (no Docker here); give the command explicitly"
            )
        return replica_env.local_command(command + list(spec.container_spec.args))
    package = spec.python_package_spec
    return [sys.executable, "-m", package.python_module, *package.args]


def pool_commands(worker_pool_specs: Sequence[Mapping[str, Any] | str]) -> list[list[str]]:
    """The command line of each pool with replicas (what `fork_client.session` looks at)."""
    from pipelines.jobs.worker_pools import validate_worker_pool_specs

    specs = validate_worker_pool_specs(worker_pool_specs)
    return [_pool_command(s) for s in specs if s.replica_count > 0]


def plan_replicas(
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    *,
    base_output_directory: str | None = None,
    trial_id: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    log_dir: str,
    jobs_at_once: int = 1,
) -> list[Replica]:
    """The processes a job runs: argv and environment per replica (nothing started).

    `jobs_at_once` is how many such jobs share this host (a study's parallel trials):
    with the job's replicas, it sets each replica's share of the cores.
    """
    from pipelines.jobs.worker_pools import validate_worker_pool_specs

    specs = validate_worker_pool_specs(worker_pool_specs)
    pools = [(i, s) for i, s in enumerate(specs) if s.replica_count > 0]
    processes = sum(s.replica_count for _, s in pools)
    threads = replica_env.cpu_threads_env(processes * max(1, jobs_at_once))
    ports = iter(free_ports(processes))
    cluster: dict[str, Sequence[str]] = {
        f"workerpool{i}": [f"127.0.0.1:{next(ports)}" for _ in range(s.replica_count)]
        for i, s in pools
    }
    replicas = []
    for pool_index, spec in pools:
        argv = _pool_command(spec)
        for replica_index in range(spec.replica_count):
            env = replica_env.base_env()
            env.update({e.name: e.value for e in spec.container_spec.env})
            name = f"{replica_env.POOL_TASK_TYPES[pool_index]}-{replica_index}"
            tmp_dir = os.path.join(log_dir, TMP_DIR, name)
            env.update(scratch.tmp_env(tmp_dir))
            if base_output_directory:
                env.update(replica_env.output_dirs(base_output_directory, trial_id))
            env.update(replica_env.cluster_env(cluster, pool_index, replica_index, trial_id))
            logical_devices = spec.machine_spec.accelerator_count  # its meaning on this machine
            if logical_devices > 1:
                env[replica_env.LOGICAL_DEVICES_ENV] = str(logical_devices)
            env.update(threads)
            env.update(extra_env or {})
            replicas.append(
                Replica(
                    name=name,
                    pool_index=pool_index,
                    replica_index=replica_index,
                    argv=list(argv),
                    env=env,
                    log_path=os.path.join(log_dir, f"{name}.log"),
                    tmp_dir=tmp_dir,
                )
            )
    return replicas


def head(path: str) -> str:
    """The start of a log file, where a trainer's start-up lines are ('' when missing)."""
    try:
        with open(path, "rb") as f:
            return f.read(LOG_WINDOW_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log file ('' when missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_WINDOW_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LocalCustomJob:
    """A custom job on this machine; `run_custom_job` is the one-call form.

    Use as a context manager (the processes are stopped on exit), `start()`
    then `wait()`; `stop()` ends it early from any thread.
    """

    def __init__(
        self,
        worker_pool_specs: Sequence[Mapping[str, Any] | str],
        *,
        base_output_directory: str | None = None,
        trial_id: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_dir: str | None = None,
        cwd: str | None = None,
        echo: Callable[[str], None] | None = echo_to_stderr,
        startup_timeout: float | None = DEFAULT_STARTUP_TIMEOUT,
        timeout: float | None = None,
        grace_period: float = DEFAULT_GRACE_SECONDS,
        fork_server: fork_client.ForkServer | None = None,
        jobs_at_once: int = 1,
    ):
        """Plan the replicas; nothing starts until `start()`.

        Twelve parameters, kept flat: Vertex `CustomJob`'s two (`worker_pool_specs`,
        `base_output_directory`) and keyword-only run options with defaults, which
        `run_custom_job` passes through by name; an options object would be one more type for
        every caller to build.

        Raises:
            CustomJobError: `base_output_directory` is not a local path.
        """
        if log_dir is None:
            log_dir = (
                job_local_dir(base_output_directory, trial_id)
                if base_output_directory
                else tempfile.mkdtemp(prefix="hpt-job-")
            )
        if base_output_directory and "://" in base_output_directory:
            raise CustomJobError(
                f"base_output_directory={base_output_directory}: the local executor needs a "
                "local path"
            )
        self.replicas = plan_replicas(
            worker_pool_specs,
            base_output_directory=base_output_directory,
            trial_id=trial_id,
            extra_env=extra_env,
            log_dir=log_dir,
            jobs_at_once=jobs_at_once,
        )
        self.log_dir = log_dir
        self.cwd = cwd
        self.echo = echo
        self.startup_timeout = startup_timeout
        self.timeout = timeout
        self.grace_period = grace_period
        self.fork_server = fork_server
        self.started_at: float | None = None
        self._stop_requested = threading.Event()

    def __enter__(self) -> LocalCustomJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self._terminate(self.replicas)

    # --- processes -------------------------------------------------------------------------

    def start(self) -> None:
        """Start every replica (each in its own process group)."""
        os.makedirs(self.log_dir, exist_ok=True)
        self.started_at = time.monotonic()
        for replica in self.replicas:
            os.makedirs(replica.tmp_dir, exist_ok=True)
            try:
                replica.process, replica.started_by, how = replica_process.launch(
                    replica.argv, replica.env, self.cwd, self.fork_server
                )
            except OSError as err:
                self._terminate(self.replicas)
                raise CustomJobError(
                    f"replica {replica.name}: cannot start {replica.argv[0]!r} ({err.strerror})",
                    replica=replica.name,
                ) from err
            with open(replica.log_path, "ab") as log:
                log.write(f"$ {' '.join(replica.argv)}\n{how}".encode())
            replica.reader = threading.Thread(
                target=self._pump, args=(replica,), name=f"log-{replica.name}", daemon=True
            )
            replica.reader.start()

    def _pump(self, replica: Replica) -> None:
        """Copy a replica's output to its log; the chief's alone to the echo (docs/local-run.md)."""
        assert replica.process is not None and replica.process.stdout is not None
        echo = self.echo if (replica.pool_index, replica.replica_index) == (0, 0) else None
        with open(replica.log_path, "ab") as log:
            for raw in replica.process.stdout:
                if replica.first_output_at is None:
                    replica.first_output_at = time.monotonic()
                log.write(raw)
                log.flush()
                if echo:
                    echo(f"[{replica.name}] {raw.decode('utf-8', 'replace').rstrip()}")

    def _signal(self, replica: Replica, sig: int) -> None:
        if replica.process is not None and replica.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(replica.process.pid, sig)

    def stop(self) -> None:
        """Stop every replica (from any thread); `wait` then returns a stopped result."""
        self._stop_requested.set()
        self._terminate(self.replicas)

    def _terminate(self, replicas: Sequence[Replica]) -> None:
        """SIGTERM each replica's process group, SIGKILL what is left after the grace period."""
        targets = [r for r in replicas if r.process is not None]
        for r in targets:
            self._signal(r, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_period
        for r in targets:
            assert r.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        for r in targets:
            self._signal(r, signal.SIGKILL)
        for r in targets:
            assert r.process is not None
            r.process.wait()
            if r.reader is not None:
                r.reader.join(timeout=5)

    # --- waiting ---------------------------------------------------------------------------

    def _fail(self, replica: Replica, why: str) -> CustomJobError:
        self._terminate(self.replicas)
        where = f"workerpool{replica.pool_index}, replica {replica.replica_index}"
        return CustomJobError(
            f"replica {replica.name} ({where}) {why}; log: {replica.log_path}; "
            + scratch.kept_note(os.path.join(self.log_dir, TMP_DIR)),
            replica=replica.name,
            log_tail=tail(replica.log_path),
            exit_code=replica.returncode,
        )

    def _result(self, stopped: bool) -> JobResult:
        """The result of a job that did not fail; its replicas' temporary files go."""
        scratch.remove(os.path.join(self.log_dir, TMP_DIR))
        return JobResult(
            stopped=stopped,
            elapsed_seconds=time.monotonic() - (self.started_at or time.monotonic()),
            exit_codes={r.name: r.returncode for r in self.replicas},
            log_paths={r.name: r.log_path for r in self.replicas},
        )

    def wait(
        self, on_tick: Callable[[], bool] | None = None, poll_interval: float = 0.1
    ) -> JobResult:
        """Wait for the job; raise `CustomJobError` when a replica fails or a deadline passes.

        Args:
            on_tick: Called at least every `poll_interval` seconds (and when a replica
                exits); returning True stops the job, which then ends as stopped (not failed).
            poll_interval: Longest time between checks; the job also ends as soon as its
                last replica exits.
        """
        if self.started_at is None:
            self.start()
        assert self.started_at is not None
        try:
            while True:
                now = time.monotonic()
                self._raise_on_failure(now)
                servers = [r for r in self.replicas if r.pool_index == PS_POOL]
                others = [r for r in self.replicas if r.pool_index != PS_POOL]
                if all(r.returncode == 0 for r in others):
                    self._terminate(servers)
                    for r in self.replicas:
                        if r.reader is not None:
                            r.reader.join(timeout=5)
                    return self._result(stopped=False)
                if self._stop_requested.is_set():
                    self.stop()
                    return self._result(stopped=True)
                self._raise_past_deadline(now - self.started_at)
                if on_tick is not None and on_tick():
                    self.stop()
                    return self._result(stopped=True)
                # Not a plain sleep: a job ends as soon as its last replica exits (one that
                # exited since the checks above is seen on the next pass, without waiting).
                unfinished = next((r for r in others if r.returncode is None), None)
                if unfinished is not None:
                    unfinished.wait_for_exit(poll_interval)
        except BaseException:
            self._terminate(self.replicas)
            raise

    def _raise_on_failure(self, now: float) -> None:
        """Note replicas that exited; raise for the first that failed (unless stopping)."""
        for r in self.replicas:
            if r.exited_at is None and r.returncode is not None:
                r.exited_at = now
        failed = sorted(
            (r for r in self.replicas if r.returncode not in (None, 0)),
            key=lambda r: r.exited_at or now,
        )
        if failed and not self._stop_requested.is_set():
            raise self._fail(failed[0], _exit_reason(failed[0].returncode))

    def _raise_past_deadline(self, elapsed: float) -> None:
        """Raise when the job ran past `timeout`, or a replica never joined in start-up."""
        if self.timeout is not None and elapsed > self.timeout:
            running = [r for r in self.replicas if r.returncode is None]
            names = ", ".join(r.name for r in running)
            raise self._fail(
                running[0],
                f"timed out: the job ran past {self.timeout:g}s ({names} running)",
            )
        if (
            self.startup_timeout is not None
            and len(self.replicas) > 1
            and elapsed > self.startup_timeout
        ):
            silent = [
                r for r in self.replicas if r.first_output_at is None and r.returncode is None
            ]
            if silent:
                raise self._fail(
                    silent[0],
                    f"never joined: no output within the {self.startup_timeout:g}s "
                    "start-up deadline",
                )


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run_custom_job(
    worker_pool_specs: Sequence[Mapping[str, Any] | str],
    base_output_directory: str | None = None,
    *,
    on_tick: Callable[[], bool] | None = None,
    **options: Any,
) -> JobResult:
    """Run a custom job's `worker_pool_specs` here and wait for it.

    Args:
        worker_pool_specs: Vertex payload (snake_case; validated strictly).
        base_output_directory: Local directory; sets the `AIP_*` variables like Vertex.
        on_tick: See `LocalCustomJob.wait`.
        **options: `LocalCustomJob` options: trial_id, extra_env, log_dir, cwd, echo,
            startup_timeout, timeout, grace_period, fork_server, jobs_at_once.

    Returns:
        The result; `stopped` is True only when `on_tick` ended it.

    Raises:
        CustomJobError: a replica failed, never joined, or the job timed out.
    """
    with LocalCustomJob(
        worker_pool_specs, base_output_directory=base_output_directory, **options
    ) as job:
        return job.wait(on_tick=on_tick)
