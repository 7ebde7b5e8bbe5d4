"""Start local trainer replicas from a preloaded process instead of afresh.

`pipelines.jobs.fork_server` imports TensorFlow once and forks a child per replica that is
the process `python -m trainer.task …` would have been (docs/fork-server.md, "The fork server,
in detail", says what a child gets and when the server refuses). `ForkServer` starts and
talks to it, `ForkedProcess` is the child as the executor sees it (the part of
`subprocess.Popen` that `local_job` uses), and `session()` decides which server a job uses:

* `HPT_FORK_SERVER=off` in the environment: none, every replica starts afresh;
* `HPT_FORK_SERVER=<address>`: the server an ancestor started (`hpt-pipeline run`
  starts one for the whole run, so every study and job of the run shares it; it also
  serves the TensorFlow halves of the preparation and evaluation steps, `step_process`);
* otherwise a server of its own for the block (a study, a final job).

A refused request, or a server that is unavailable (not Linux, preloading failed),
means a fresh process for that replica, and its log says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, NamedTuple

from pipelines.jobs.fork_server import REPLICA_VARIABLES, ignored_signals

ENV = "HPT_FORK_SERVER"
LOG_FILE = "fork-server.log"  # the server's own output, beside the logs of the job it serves
OFF = "off"
TRAINER_MODULES = ("trainer.task",)  # what a study's or a job's own server serves
# What the run's shared server serves: the trainer, and the TensorFlow halves of the
# preparation and evaluation steps (`step_process`). The trainer first: its preload keeps
# what TensorFlow imports but never uses out of TensorFlow's import (3.5 → 3.3 s here).
# Preparation next (it adds little), so the preparation step is forked while evaluation's
# scikit-learn (~0.6 s) is still being imported: the server preloads its modules in
# order and serves each as soon as it is in. The features step's job (`trainer.features`,
# TF-free until it runs) comes after preparation, which it follows.
RUN_MODULES = (*TRAINER_MODULES, "dataprep.prepare", "trainer.features", "trainer.evaluate")
READY_TIMEOUT = 300.0  # seconds for the server to import what it preloads
assert ENV in REPLICA_VARIABLES  # a child sees the address; it must not count as a difference


class Request(NamedTuple):
    """A request sent to the server: its argv, connection, and the read end of the output."""

    argv: list[str]
    conn: socket.socket
    output: int


class ForkedProcess:
    """A child of the fork server, as `local_job` uses a `subprocess.Popen`.

    The connection it was requested on stays open until its exit status arrives;
    closing it (this process ending) makes the server kill the child.
    """

    def __init__(
        self,
        args: Sequence[str],
        pid: int,
        conn: socket.socket,
        stdout: IO[bytes],
        received: bytes = b"",
    ):
        """`received`: what came after the `{"pid": N}` line (its exit, if it was that quick)."""
        self.args = list(args)
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = b""
        self._lock = threading.Lock()
        self._take(received)

    def _take(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "returncode" in message:
                self.returncode = int(message["returncode"])
        if self.returncode is not None:
            self._conn.close()

    def _read(self, timeout: float) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return
            data = self._conn.recv(4096)
            if not data:  # the server is gone, and its children with it (PR_SET_PDEATHSIG)
                self.returncode = -signal.SIGKILL
            self._take(data)

    def poll(self) -> int | None:
        """The exit code if the child has exited (negative: killed by that signal), else None."""
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's exit; raise `subprocess.TimeoutExpired` after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read(left)
        return self.returncode


class ForkServer:
    """A fork server process: started here (`start`) or an ancestor's (`connect`)."""

    def __init__(
        self,
        address: str,
        process: subprocess.Popen[bytes] | None,
        modules: Sequence[str],
    ):
        self.address = address
        self.modules = tuple(modules)
        self.process = process
        self.pid: int | None = None
        self.unavailable: str | None = None
        self._ready = process is None
        self._lock = threading.Lock()

    @classmethod
    def start(
        cls,
        *,
        cwd: str | None = None,
        log_path: str | None = None,
        modules: Sequence[str] = TRAINER_MODULES,
        env: Mapping[str, str] | None = None,
    ) -> ForkServer:
        """Start a server that preloads `modules`; `log_path` gets its stderr.

        Args:
            cwd: Its working directory (requests shadowing its modules are refused).
            log_path: File for its output (default: discarded).
            modules: What it preloads and serves.
            env: Its environment (default: what replicas start from, `replica_env.base_env`).
        """
        from pipelines.jobs import replica_env

        address = f"hpt-fork-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if log_path:
            os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "pipelines.jobs.fork_server", address, *modules],
                env=dict(env) if env is not None else replica_env.base_env(),
                cwd=cwd,
                stdin=subprocess.PIPE,  # the lifeline: EOF when this process is gone
                stdout=subprocess.PIPE,
                stderr=log,
            )
        finally:
            if log_path:
                log.close()  # type: ignore[union-attr]
        return cls(address, process, modules)

    @classmethod
    def connect(cls, address: str) -> ForkServer:
        """A server another process started and owns (the run's: `RUN_MODULES`)."""
        return cls(address, None, RUN_MODULES)

    def ready(self, timeout: float = READY_TIMEOUT) -> bool:
        """Wait until the server serves (its first module is in); False, with why, if it cannot."""
        with self._lock:
            if not self._ready:
                self._ready = True
                assert self.process is not None and self.process.stdout is not None
                ready, _, _ = select.select([self.process.stdout], [], [], timeout)
                line = self.process.stdout.readline().decode().strip() if ready else ""
                if line.startswith("ready "):
                    self.pid = int(line.split()[1])
                else:
                    self.unavailable = line or f"the fork server did not start within {timeout:g}s"
            return self.unavailable is None

    def serves(self, argv: Sequence[str]) -> bool:
        """Whether `argv` is `python -m <a preloaded module> …` (the server checks the rest)."""
        return len(argv) >= 3 and argv[1] == "-m" and argv[2] in self.modules

    def spawn(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None
    ) -> ForkedProcess | str:
        """Fork a child running `argv` with `env` in `cwd`; its output comes on `.stdout`.

        Returns:
            The child, or one line saying why it was not forked (start it afresh then).
        """
        sent = self.send(argv, env, cwd)
        return sent if isinstance(sent, str) else self.receive(sent)

    def send(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Request | str:
        """Ask for a child (the first half of `spawn`): queued at the server once this returns.

        Returns:
            The request to `receive` the child from, or why it could not be sent.
        """
        if not self.ready():
            return f"fork server unavailable: {self.unavailable}"
        read_end, write_end = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect("\0" + self.address)
            request = {
                "argv": list(argv),
                "env": dict(env),
                "cwd": cwd or os.getcwd(),
                "ignored_signals": ignored_signals(),
            }
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [write_end])
        except OSError as err:
            conn.close()
            os.close(read_end)
            return f"fork server {self.address} unreachable ({err})"
        finally:
            os.close(write_end)
        return Request(list(argv), conn, read_end)

    def receive(self, request: Request) -> ForkedProcess | str:
        """The child the server forked for `request` (waits for it), or why it refused."""
        reply = b""
        try:
            while b"\n" not in reply:
                more = request.conn.recv(4096)
                if not more:
                    raise ConnectionError("the fork server closed the connection")
                reply += more
            # A child that exits at once may have its exit status in the same read.
            line, _, later = reply.partition(b"\n")
            message = json.loads(line)
        except (OSError, ValueError) as err:
            message = {"refused": f"fork server {self.address} unreachable ({err})"}
        if "pid" not in message:
            request.conn.close()
            os.close(request.output)
            return str(message.get("refused", message))
        return ForkedProcess(
            request.argv, int(message["pid"]), request.conn, os.fdopen(request.output, "rb"), later
        )

    def close(self) -> None:
        """Stop a server this process started (its children are killed); no-op otherwise."""
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def serves(argv: Sequence[str]) -> bool:
    """Whether a replica command is one the fork server preloads (`python -m trainer.task`)."""
    return len(argv) >= 3 and argv[1] == "-m" and argv[2] in TRAINER_MODULES


def shared_server() -> ForkServer | None:
    """The server an ancestor shares through `HPT_FORK_SERVER` (None: none, or forking off)."""
    setting = os.environ.get(ENV, "")
    return ForkServer.connect(setting) if setting and setting != OFF else None


@contextlib.contextmanager
def session(
    commands: Sequence[Sequence[str]], *, cwd: str | None = None, log_path: str | None = None
) -> Iterator[ForkServer | None]:
    """The server for a job or study running `commands` (see the module docstring).

    None (start replicas afresh) when forking is off or no command is served.
    """
    setting = os.environ.get(ENV, "")
    if setting == OFF or not any(serves(argv) for argv in commands):
        yield None
    elif setting:
        yield ForkServer.connect(setting)
    else:
        server = ForkServer.start(cwd=cwd, log_path=log_path)
        try:
            yield server
        finally:
            server.close()


@contextlib.contextmanager
def shared_for_children(*, log_path: str | None = None) -> Iterator[Any]:
    """Start a server and point `HPT_FORK_SERVER` at it for the processes started in the block."""
    if os.environ.get(ENV):
        yield None
        return
    server = ForkServer.start(log_path=log_path, modules=RUN_MODULES)
    os.environ[ENV] = server.address
    try:
        yield server
    finally:
        os.environ.pop(ENV, None)
        server.close()
