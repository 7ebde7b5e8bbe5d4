"""Preloaded trainer processes for the local executors: `python -m pipelines.jobs.fork_server`.

A fresh trainer process spends most of its start-up importing TensorFlow and Keras; this
server pays that once and forks one child per request, a child that is the process
`python -m <module> <args>` would have been (its environment, working directory, argv,
output, process group and signal dispositions as requested). A request is served only when
a fresh process could not have differed; otherwise it is refused in one line and the client
starts a fresh process. It imports no TensorFlow itself, only the modules it is asked to
preload, by name (`tests/test_architecture.py:DYNAMIC_IMPORTERS` names it for that).
What a child gets, the refusal rule and the protocol: docs/fork-server.md, "The fork server, in
detail"; the figures: `benchmarks/results/readme-figures.md`, "Preloaded trainer".
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import json
import os
import random
import runpy
import select
import selectors
import signal
import socket
import struct
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from trainer.cluster import CPU_THREADS_ENV, LOGICAL_DEVICES_ENV
from trainer.gc_pause import collector_paused

# Set per replica by the local executors and read only at run time, never at import:
# Vertex's directories and trial variables, the cluster, temporary folders, the
# logical-device count, the op threads' share of the cores, and this server's own
# address. Also the terminal's size, which importing `readline` (pytest, pdb) puts in the
# C environment only, so a process's children see it while its `os.environ` does not.
REPLICA_VARIABLES = (
    "LINES",
    "COLUMNS",
    "AIP_",
    "CLOUD_ML_",
    "CLUSTER_SPEC",
    "TF_CONFIG",
    "TMPDIR",
    "TEMP",
    "TMP",
    LOGICAL_DEVICES_ENV,
    CPU_THREADS_ENV,
    "HPT_FORK_SERVER",
)
# Set by a shell to the directory it runs in (a wrapper that changes directory without
# updating them leaves them stale); Python reads neither, and the child gets the request's.
SHELL_VARIABLES = ("PWD", "OLDPWD")
# Signals a child gets as a fresh interpreter would: default, or ignored where the client
# (whose fresh children would inherit that across exec) ignores them; SIGINT then raises
# KeyboardInterrupt as Python's own handler, unless ignored.
RESET_SIGNALS = ("SIGINT", "SIGTERM", "SIGCHLD", "SIGHUP", "SIGUSR1", "SIGUSR2")
PRELOAD_FUNCTION = "preload"  # a served module's function that imports what it will need
MAX_REQUEST_BYTES = 1 << 20
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # resolved now, not in each child
    except (OSError, AttributeError):
        return lambda *args: None


def per_replica(name: str) -> bool:
    """Whether an environment variable may differ between the server and a child.

    Entries of `REPLICA_VARIABLES` ending in `_` are prefixes, the others whole names.
    """
    prefixes = tuple(entry for entry in REPLICA_VARIABLES if entry.endswith("_"))
    return name in REPLICA_VARIABLES or name in SHELL_VARIABLES or name.startswith(prefixes)


def environment_difference(server: Mapping[str, str], requested: Mapping[str, str]) -> list[str]:
    """Names of variables outside `REPLICA_VARIABLES` that differ (set, unset or changed)."""
    names = {n for n in set(server) | set(requested) if not per_replica(n)}
    return sorted(n for n in names if server.get(n) != requested.get(n))


def shadowed_modules(cwd: str, loaded: Mapping[str, Any]) -> list[str]:
    """Loaded top-level modules that a fresh process started in `cwd` would import from `cwd`.

    `python -m` puts the working directory first on `sys.path`; a module of the same
    name there would replace the one the server preloaded.
    """
    names = sorted({name.partition(".")[0] for name in loaded if loaded[name] is not None})
    shadowed = []
    for name in names:
        spec = importlib.machinery.PathFinder.find_spec(name, [cwd])
        if spec is None or spec.origin is None:
            continue
        module = loaded.get(name)
        if os.path.realpath(spec.origin) != os.path.realpath(getattr(module, "__file__", "") or ""):
            shadowed.append(name)
    return shadowed


_PRCTL = _load_prctl()


class Server:
    """The preloaded process: accepts requests, forks children, reports their exits."""

    def __init__(self, address: str, modules: Sequence[str]):
        self.modules = tuple(modules)
        self.environment = dict(os.environ)  # before preloading changes anything
        self.cwd = os.getcwd()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid → (connection, pidfd)
        self.loaded: set[str] = set()  # served modules preloaded so far
        self.failed: dict[str, str] = {}  # served module → why its preload failed
        # Requests for a module still to be preloaded: (connection, request, output fd).
        self.waiting: list[tuple[socket.socket, dict[str, Any], int]] = []

    def preload_module(self, name: str) -> None:
        """Import one served module and run its `preload()`; its requests are served after.

        Modules its `preload()` made unimportable (`sys.modules[name] = None`, as
        `trainer.task` does with what it never uses) are importable again once it is
        loaded: the next served module may need them, and each module's own start-up
        makes its choice again in its child.

        Raises:
            Exception: Whatever importing it raised (`failed` then names it).
        """
        blocked = {n for n, m in sys.modules.items() if m is None}
        try:
            module = importlib.import_module(name)
            getattr(module, PRELOAD_FUNCTION, lambda: None)()
        except Exception as err:
            self.failed[name] = f"{type(err).__name__}: {err}"
            raise
        finally:
            for unblocked in [n for n, m in sys.modules.items() if m is None and n not in blocked]:
                del sys.modules[unblocked]
        # As in `python -m`, the module itself is not imported: a child runs it as __main__.
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent and getattr(sys.modules.get(parent), child, None) is module:
            delattr(sys.modules[parent], child)
        self.loaded.add(name)

    def refusal(self, request: Mapping[str, Any]) -> str | None:
        """Why a request cannot be served from this process (None: it can)."""
        argv = request.get("argv") or []
        if len(argv) < 3 or argv[1] != "-m" or argv[2] not in self.modules:
            return f"not `python -m` of a preloaded module ({', '.join(self.modules)})"
        if argv[2] in self.failed:
            return f"preloading {argv[2]} failed ({self.failed[argv[2]]})"
        if os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
            return f"interpreter {argv[0]} is not the server's {sys.executable}"
        differ = environment_difference(self.environment, request.get("env") or {})
        if differ:
            return f"environment differs from the preloaded server's: {', '.join(differ[:5])}"
        cwd = request.get("cwd") or self.cwd
        if not os.path.isdir(cwd):
            return f"working directory {cwd} does not exist"
        shadowed = shadowed_modules(cwd, sys.modules)
        if shadowed:
            return f"working directory {cwd} shadows preloaded modules: {', '.join(shadowed[:5])}"
        return None

    def serve(self) -> None:
        """Serve until stdin reaches EOF; then kill the remaining children and return."""
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
        try:
            while True:
                for key, _ in self.selector.select():
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "lifeline":
                        if not os.read(sys.stdin.fileno(), 4096):
                            return
                    elif key.data[0] == "exit":
                        self._reap(key.data[1])
                    else:  # the client closed its connection: it is gone, so is the child
                        self._orphaned(key.data[1])
        finally:
            for pid in list(self.children):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                self._reap(pid)

    def serve_pending(self) -> None:
        """Between preloads: take the requests already queued, without waiting for more."""
        while select.select([self.listener], [], [], 0)[0]:
            self._accept()
        self._serve_waiting()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            if uid != os.getuid():
                conn.close()
                return
            data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 1)
            while not data.endswith(b"\n") and len(data) < MAX_REQUEST_BYTES:
                more = conn.recv(MAX_REQUEST_BYTES)
                if not more:
                    break
                data += more
            request = json.loads(data)
        except (OSError, ValueError) as err:
            _refuse(conn, f"bad request ({err})")
            return
        why = "no output file descriptor sent" if len(fds) != 1 else self.refusal(request)
        if why:
            _refuse(conn, why, fds)
        elif request["argv"][2] in self.loaded:
            self._fork(conn, request, fds[0])
        else:  # its module is still to be preloaded: checked again once it is in
            self.waiting.append((conn, request, fds[0]))

    def _serve_waiting(self) -> None:
        """Answer the waiting requests whose module is in now (or failed); keep the others."""
        still = []
        for conn, request, fd in self.waiting:
            module = request["argv"][2]
            if module not in self.loaded and module not in self.failed:
                still.append((conn, request, fd))  # its module is still to be preloaded
                continue
            why = self.refusal(request)  # again: what is loaded now may be shadowed
            if why:
                _refuse(conn, why, [fd])
            else:
                self._fork(conn, request, fd)
        self.waiting = still

    def _fork(self, conn: socket.socket, request: Mapping[str, Any], output_fd: int) -> None:
        started_r, started_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; it never returns
            os.close(started_r)
            _become(request, output_fd, started_w)
        os.close(started_w)
        os.close(output_fd)
        os.read(started_r, 1)  # the child leads its own process group now: signals reach it
        os.close(started_r)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))
        _send(conn, {"pid": pid})

    def _orphaned(self, pid: int) -> None:
        conn, _ = self.children[pid]
        self.selector.unregister(conn)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def _reap(self, pid: int) -> None:
        conn, pidfd = self.children.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        with contextlib.suppress(OSError):
            _send(conn, {"returncode": os.waitstatus_to_exitcode(status)})
        conn.close()


def _send(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _refuse(conn: socket.socket, why: str, fds: Sequence[int] = ()) -> None:
    """Answer a request with `{"refused": why}` and drop it: its connection and `fds`."""
    for fd in fds:
        os.close(fd)
    _send(conn, {"refused": why})
    conn.close()


def ignored_signals() -> list[str]:
    """The `RESET_SIGNALS` this process ignores (a fresh child of it would ignore them too)."""
    return [
        name for name in RESET_SIGNALS if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN
    ]


def reset_signals(ignored: Sequence[str]) -> None:
    """Give `RESET_SIGNALS` a fresh interpreter's dispositions, `ignored` ones ignored."""
    for name in RESET_SIGNALS:
        sig = getattr(signal, name)
        if name in ignored:
            signal.signal(sig, signal.SIG_IGN)
        else:
            signal.signal(sig, signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)


def _become(request: Mapping[str, Any], output_fd: int, started_fd: int) -> None:
    """In the forked child: turn into `python -m <module> <args>` and exit with its status."""
    code = 1
    try:
        server = os.getppid()
        os.setsid()
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:  # the server died before the line above
            os._exit(1)
        os.write(started_fd, b".")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd > 2:  # the listener, other children's connections, pidfds, the lifeline
                with contextlib.suppress(OSError):
                    os.close(fd)
        reset_signals(request.get("ignored_signals", ()))
        os.environ.clear()
        os.environ.update(request["env"])
        cwd = request.get("cwd")
        if cwd:
            os.chdir(cwd)
        sys.path[0] = os.getcwd()
        tempfile.tempdir = None
        random.seed()
        argv = list(request["argv"])
        sys.argv = [argv[0], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m pipelines.jobs.fork_server ADDRESS MODULE...` (ADDRESS: abstract socket name)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m pipelines.jobs.fork_server ADDRESS MODULE...", file=sys.stderr)
        return 2
    address, modules = args[0], args[1:]
    if not hasattr(os, "pidfd_open"):
        print("unavailable: needs Linux 5.3+ (os.pidfd_open)", flush=True)
        return 0
    server = Server("\0" + address, modules)
    first, *later = modules
    try:
        with collector_paused():  # and frozen: children leave the preloaded pages shared
            server.preload_module(first)
    except Exception as err:  # a served module that cannot be imported: start fresh instead
        print(f"unavailable: preloading {first} failed ({err})", flush=True)
        return 0
    print(f"ready {os.getpid()}", flush=True)
    os.dup2(2, 1)  # nothing else goes to the client's pipe
    # Later modules load one by one; what was asked for meanwhile is forked in between, so
    # a child starts as soon as its own module is in (the preparation step no longer waits
    # for the evaluation step's imports), and a request for a module not in yet waits.
    for name in later:
        server.serve_pending()
        try:
            with collector_paused():
                server.preload_module(name)
        except Exception:  # its requests are refused (fresh processes instead)
            traceback.print_exc()
    server.serve_pending()
    server.serve()
    return 0


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())  # the server holds nothing that needs closing by then
