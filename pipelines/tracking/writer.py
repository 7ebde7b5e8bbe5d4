"""MLflow's writes in a process of their own, warmed up at the lowest priority while a step waits.

Importing MLflow and opening (for a new SQLite store: creating) the store cost seconds of
CPU. A step that tracks starts this process first (`Writer(uri)`): at `nice` 19 it takes
only CPU the trials leave idle, then says it is ready and waits (the evaluate and register
steps' writers, beside a second or two of work, start at the step's priority:
`Writer(nice=False)`). After the wait the step asks it for one write (`Writer.ask`: the
study's runs, the final job's, or the version registered from it), which it answers with
the write's result as one JSON line and exits. Not ready by then (a busy host starves a
niced process) it is replaced by one at normal priority, so a loaded host never waits on a
starved writer. One MLflow import per step, none in the step itself.

Protocol: argv `<uri>`; stdout: `{"ready": true}` (or `{"error": …}`), then after one JSON
request on stdin `{"result": …}` or `{"error": …}`. MLflow's own prints go to stderr.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Mapping
from typing import IO, Any

NICE = 19  # the lowest priority: idle CPU only while warming up
WRITE_TIMEOUT_S = 600.0  # a store that stops answering mid-write: given up, said in one line


class WriterError(RuntimeError):
    """The writer process failed or gave no answer; one line."""


def _start(uri: str, nice: bool) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "pipelines.tracking.writer", uri, *(["--nice"] if nice else [])]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


class Writer:
    """A writer process for the store at `uri`, warming up from construction.

    `nice`: warm up at `NICE` (a step whose own work lasts longer than MLflow's import);
    False: at the step's priority (a step of a second or two, where a niced writer is never
    ready in time and its import would be done twice).
    """

    def __init__(self, uri: str, *, nice: bool = True) -> None:
        self.uri = uri
        self._process = _start(uri, nice=nice)

    def _ready(self, wait_s: float) -> bool:
        stdout = self._process.stdout
        assert stdout is not None
        return bool(select.select([stdout], [], [], wait_s)[0])

    def ask(self, request: Mapping[str, Any]) -> Any:
        """Send `request` (`{"write": "study" | "final" | "registered", ...}`); the result.

        Raises:
            WriterError: The writer failed, or gave no answer within `WRITE_TIMEOUT_S`.
        """
        if not self._ready(0.0):  # still warming up at nice 19: a normal-priority one instead
            self._process.kill()
            self._process.wait()
            self._process = _start(self.uri, nice=False)
        try:
            out, _ = self._process.communicate(
                json.dumps(request).encode(), timeout=WRITE_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise WriterError(f"no answer in {WRITE_TIMEOUT_S:.0f} s") from None
        lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
        answer = lines[-1] if lines else {"error": f"exited with {self._process.returncode}"}
        if "error" in answer:
            raise WriterError(str(answer["error"]))
        return answer["result"]

    def close(self) -> None:
        """Stop the writer unasked (the step failed before its write)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _say(out: IO[str], **line: Any) -> None:
    out.write(json.dumps(line) + "\n")
    out.flush()


def _write(client: Any, request: Mapping[str, Any]) -> Any:
    from pipelines.tracking import runs
    from pipelines.tracking.store import Store

    if request["write"] == "study":
        return runs.write_study(
            Store(**request["store"]), request["trials"], client=client, **request["study"]
        )
    if request["write"] == "registered":
        return runs.write_registered(request["tracked"], client=client, **request["registered"])
    return runs.write_final(request["tracked"], client=client, **request["final"])


def main(argv: list[str]) -> int:
    """`python -m pipelines.tracking.writer <uri> [--nice]`: warm up, then one write."""
    out = os.fdopen(os.dup(1), "w")  # the protocol's own stdout; MLflow's prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if "--nice" in argv:
        os.nice(NICE)
    try:
        from pipelines.tracking import runs

        client = runs.open_client(argv[0])
    except Exception as err:  # noqa: BLE001 - said by the step, in one line
        _say(out, error=f"{type(err).__name__}: {err}")
        return 1
    _say(out, ready=True)
    try:
        _say(out, result=_write(client, json.loads(sys.stdin.read())))
    except Exception as err:  # noqa: BLE001 - said by the step, in one line
        _say(out, error=f"{type(err).__name__}: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
