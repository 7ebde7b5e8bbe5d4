"""`python -m tests.fork_probe [exit CODE | sleep S | raise MESSAGE]`: prints its process state.

Served by a fork server in tests/test_fork_server.py and also started afresh, so the
two states can be compared. `preload()` imports numpy, as `trainer.task.preload`
imports TensorFlow: `preloaded` says whether numpy was already there when this module
began to run (True only in a forked child).
"""

import sys

preloaded = "numpy" in sys.modules

import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402


def preload() -> None:
    """Import what the probe uses (called once by the fork server)."""
    import numpy  # noqa: F401


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def state() -> dict:
    """What a process started for a replica must get as its own."""
    import numpy as np

    matrix = np.ones((256, 256))
    return {
        "preloaded": preloaded,
        "name": __name__,
        "argv": sys.argv[1:],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "tempdir": tempfile.gettempdir(),
        "pid": os.getpid(),
        "leads_group": os.getpgid(0) == os.getpid() == os.getsid(0),
        "stdin": os.readlink("/proc/self/fd/0"),
        "random": random.random(),
        "python_threads": threading.active_count(),
        "signals": {
            name: str(signal.getsignal(getattr(signal, name)))
            for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGHUP", "SIGPIPE")
        },
        "blocked_signals": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "umask": _umask(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "open_fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "blas_works": float((matrix @ matrix)[0, 0]) == 256.0,
        "task_module_imported": "trainer.task" in sys.modules,
    }


if __name__ == "__main__":
    print(json.dumps(state()), flush=True)
    if sys.argv[1:2] == ["exit"]:
        sys.exit(int(sys.argv[2]))
    if sys.argv[1:2] == ["sleep"]:
        time.sleep(float(sys.argv[2]))
    if sys.argv[1:2] == ["raise"]:
        raise RuntimeError(sys.argv[2])
