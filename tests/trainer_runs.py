"""`python -m trainer.task` for the tests, forked from one preloaded trainer where it can be.

A fresh trainer process spends ~3.5 s (2-core host) importing TensorFlow before it reads its
flags; the tests start a dozen. The first run starts one fork server for the session
(`pipelines.jobs.fork_server`, the one the local executors use, with the environment
`conftest.run_env()` gives); every later run whose environment differs from it only in
per-replica variables (`CLOUD_ML_*`, `HPT_LOGICAL_DEVICES`, `TMPDIR` …) is a child of it,
which is the process a fresh start would have been. A run the server refuses (another
`PYTHONPATH`, `ONEDNN_MAX_CPU_ISA` …) starts afresh, as does every run under
`HPT_FORK_SERVER=off`. A forked child has one output: its stderr and stdout both arrive as
the result's `stderr` (the trainer writes nothing to stdout).
Not collected by pytest (no `test_` prefix).
"""

from __future__ import annotations

import atexit
import io
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from pipelines.jobs import fork_client

ROOT = Path(__file__).resolve().parents[1]
# Set by pytest to the running test's name: it would differ from the server's at every test
# (a refusal), and no trainer reads it. Left out of every run's environment, forked or not.
PYTEST_VARIABLE = "PYTEST_CURRENT_TEST"
_servers: dict[str, fork_client.ForkServer] = {}  # at most one: the session's


def shared_server(env: Mapping[str, str]) -> fork_client.ForkServer | None:
    """The session's trainer server (started with `env` on first use); None when forking is off."""
    if os.environ.get(fork_client.ENV) == fork_client.OFF:
        return None
    if "trainer" not in _servers:
        _servers["trainer"] = fork_client.ForkServer.start(cwd=str(ROOT), env=env)
        atexit.register(_servers["trainer"].close)
    return _servers["trainer"]


def forked(
    argv: Sequence[str], env: Mapping[str, str], server_env: Mapping[str, str]
) -> fork_client.ForkedProcess | None:
    """`argv` forked from the session's server (None: refused, unavailable or forking off)."""
    server = shared_server({k: v for k, v in server_env.items() if k != PYTEST_VARIABLE})
    child = server.spawn(argv, env, str(ROOT)) if server else None
    return None if isinstance(child, str) else child


def run(
    args: Sequence[str], *, env: Mapping[str, str], server_env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """Run the trainer with `args` and `env` to completion: forked if the server serves it.

    Raises:
        subprocess.TimeoutExpired: It ran past `timeout` seconds (it is killed first).
    """
    argv = [sys.executable, "-m", "trainer.task", *args]
    env = {k: v for k, v in env.items() if k != PYTEST_VARIABLE}
    child = forked(argv, env, server_env)
    if child is None:  # refused or unavailable: a fresh process, as before
        return subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(child.stdout.read()), daemon=True)
    reader.start()
    try:
        returncode = child.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # it leads its own process group
        raise
    reader.join(timeout=30)
    child.stdout.close()
    output = b"".join(chunks).decode(errors="replace")
    return subprocess.CompletedProcess(argv, returncode, stdout="", stderr=output)


class Started:
    """A trainer started by `start`, forked: the part of `subprocess.Popen` the tests use."""

    def __init__(self, child: fork_client.ForkedProcess):
        self.pid = child.pid  # it leads its own process group, as under start_new_session
        self.stdout: IO[str] = io.TextIOWrapper(child.stdout, errors="replace")
        self._child = child

    @property
    def returncode(self) -> int | None:
        return self._child.returncode

    def poll(self) -> int | None:
        return self._child.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._child.wait(timeout)

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        """Its whole output (stdout and stderr), once it has exited."""
        output = self.stdout.read()
        self.wait(timeout)
        self.stdout.close()
        return output, None


def start(
    args: Sequence[str], *, env: Mapping[str, str], server_env: Mapping[str, str]
) -> subprocess.Popen[str] | Started:
    """Start the trainer with `args` and `env`, its stdout and stderr in one text `.stdout`.

    Forked where the server serves it, else a fresh process; either way in a new session
    (`os.killpg(proc.pid, …)` reaches it and only it).
    """
    argv = [sys.executable, "-m", "trainer.task", *args]
    env = {k: v for k, v in env.items() if k != PYTEST_VARIABLE}
    child = forked(argv, env, server_env)
    if child is None:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return Started(child)
