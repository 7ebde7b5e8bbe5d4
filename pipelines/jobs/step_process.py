"""Run a step's TensorFlow half as `python -m <module> … --result=<file>`; return what it wrote.

The preparation and evaluation steps need TensorFlow for part of their work. Their
components run that part as a process of its own, so that in a local run it is
forked from the run's preloaded process (`fork_client.shared_server`,
`HPT_FORK_SERVER`) instead of importing TensorFlow again (~2 s a step). Elsewhere
(Vertex, Kubeflow, `HPT_FORK_SERVER=off`, a refused request) the same command starts
afresh in the same image. Either way its environment is the one trainer replicas get
(`replica_env.base_env`), its output is streamed to this process's stdout line by
line, and the module writes its result as JSON to a local file this process reads.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from pipelines.jobs import fork_client, replica_env, replica_process


class StepProcessError(RuntimeError):
    """The step's process failed; its own error line was streamed before this."""


def run_module(module: str, args: Sequence[str]) -> Any:
    """Run `python -m module *args --result=<file>` to completion; return the file's JSON.

    Raises:
        StepProcessError: It could not start, exited non-zero, or wrote no result.
    """
    with tempfile.TemporaryDirectory(prefix="step-") as folder:
        result = os.path.join(folder, "result.json")
        argv = [sys.executable, "-m", module, *args, f"--result={result}"]
        try:
            process, how, note = replica_process.launch(
                argv, replica_env.base_env(), os.getcwd(), fork_client.shared_server()
            )
        except OSError as err:
            raise StepProcessError(f"python -m {module}: could not start ({err})") from err
        print(f"$ python -m {module} ({'forked' if how == 'fork' else 'started afresh'})")
        if note and how != "fork":
            print(note.rstrip())
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                print(line.decode(errors="replace").rstrip("\n"), flush=True)
        code = process.wait()
        if code != 0:
            raise StepProcessError(f"python -m {module} exited with {code}")
        if not os.path.isfile(result):
            raise StepProcessError(f"python -m {module} exited 0 but wrote no {result}")
        with open(result, encoding="utf-8") as f:
            return json.load(f)
