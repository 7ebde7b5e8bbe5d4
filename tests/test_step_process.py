"""A step's TensorFlow half as a process of its own: forked when the run shares a server."""

from __future__ import annotations

import os

import pytest

from pipelines.jobs import fork_client, replica_env, step_process
from tests.conftest import ROOT

PROBE = "tests.step_probe"


@pytest.fixture(autouse=True)
def _same_environment(monkeypatch):
    monkeypatch.setattr(fork_client, "RUN_MODULES", (PROBE,))  # what the run's server serves
    # pytest renames the running test in the environment: a forked child must see the
    # server's environment, so it is left out on both sides.
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.chdir(ROOT)


def test_started_afresh_its_output_is_streamed_and_its_result_returned(monkeypatch, capsys):
    monkeypatch.setenv(fork_client.ENV, fork_client.OFF)
    result = step_process.run_module(PROBE, ["--say=hello"])
    assert result["say"] == "hello"
    assert result["preloaded"] is False
    assert result["pid"] != os.getpid()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"$ python -m {PROBE} (started afresh)"
    assert "probe says hello" in out and "probe on stderr" in out


def test_a_failing_step_raises_after_its_own_error_line(monkeypatch, capsys):
    monkeypatch.setenv(fork_client.ENV, fork_client.OFF)
    with pytest.raises(step_process.StepProcessError, match=f"python -m {PROBE} exited with 3"):
        step_process.run_module(PROBE, ["--fail"])
    # The run's failure line comes from the step's own error, printed before the exception.
    assert "ProbeError: asked to fail" in capsys.readouterr().out


def test_with_a_shared_server_the_step_is_forked_from_it(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv(fork_client.ENV, raising=False)
    server = fork_client.ForkServer.start(
        cwd=str(ROOT),
        log_path=str(tmp_path / "server.log"),
        modules=(PROBE,),
        env=replica_env.base_env(),
    )
    try:
        assert server.ready(60), server.unavailable
        monkeypatch.setenv(fork_client.ENV, server.address)
        result = step_process.run_module(PROBE, ["--say=forked"])
    finally:
        server.close()
    assert result == {"say": "forked", "preloaded": True, "pid": result["pid"]}
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"$ python -m {PROBE} (forked)"
    assert "probe says forked" in out


def test_a_refused_request_starts_afresh_and_says_why(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv(fork_client.ENV, raising=False)
    server = fork_client.ForkServer.start(
        cwd=str(ROOT), modules=(PROBE,), env=replica_env.base_env()
    )
    try:
        assert server.ready(60), server.unavailable
        monkeypatch.setenv(fork_client.ENV, server.address)
        monkeypatch.setenv("HPT_STEP_PROBE_DIFFERENCE", "1")  # read at import: must be refused
        result = step_process.run_module(PROBE, [])
    finally:
        server.close()
    assert result["preloaded"] is False
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"$ python -m {PROBE} (started afresh)"
    assert "environment differs" in out[1] and "HPT_STEP_PROBE_DIFFERENCE" in out[1]
