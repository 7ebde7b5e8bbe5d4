"""Replicas forked from a preloaded process: each is the process a fresh start would be.

A probe module (`tests.fork_probe`) is served by a real `pipelines.jobs.fork_server` and also
started afresh with the same environment; their states must match except where
a fork cannot and need not (pid, random draws, the preloaded modules).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.jobs import fork_client, fork_server, local_job, replica_env
from pipelines.jobs.fork_client import ForkedProcess, ForkServer
from tests.conftest import ROOT

PROBE = "tests.fork_probe"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("fork") / "server.log"
    # pytest renames the running test in the environment: left out on both sides.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        started = ForkServer.start(cwd=str(ROOT), log_path=str(log), modules=(PROBE,))
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    assert started.ready(60), started.unavailable
    yield started
    started.close()


def replica_environment(tmp_path: Path, name: str) -> dict[str, str]:
    """What `local_job` gives a replica: the base environment plus per-replica variables."""
    env = replica_env.base_env()
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(
        {
            "TMPDIR": str(tmp_path / name),
            "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / name / "metrics"),
            "CLOUD_ML_TRIAL_ID": name,
            "AIP_MODEL_DIR": str(tmp_path / name / "model") + "/",
        }
    )
    (tmp_path / name).mkdir()
    return env


def probe_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", PROBE, *args]


def forked_state(server: ForkServer, env: dict[str, str], *args: str) -> tuple[dict, int]:
    child = server.spawn(probe_argv(*args), env, str(ROOT))
    assert isinstance(child, ForkedProcess), child
    output = child.stdout.read().decode()
    child.stdout.close()
    return json.loads(output.splitlines()[0]), child.wait(30)


def fresh_state(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run(
        probe_argv(*args),
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    return json.loads(out.stdout.splitlines()[0])


def test_a_forked_child_has_the_state_of_a_fresh_process(server, tmp_path):
    first_env = replica_environment(tmp_path, "1")
    second_env = replica_environment(tmp_path, "2")
    first, first_code = forked_state(server, first_env, "one", "--x=1")
    second, second_code = forked_state(server, second_env, "two")
    fresh = fresh_state(first_env, "one", "--x=1")

    assert (first_code, second_code) == (0, 0)
    assert first["preloaded"] and second["preloaded"] and not fresh["preloaded"]
    # Its own environment exactly (metric file, trial id, temporary folder), argv, cwd.
    assert first["env"] == first_env and second["env"] == second_env
    assert first["argv"] == ["one", "--x=1"] and second["argv"] == ["two"]
    assert first["tempdir"] == str(tmp_path / "1") and second["tempdir"] == str(tmp_path / "2")
    assert first["pid"] != second["pid"]
    assert first["random"] != second["random"]  # reseeded: no state shared through the fork
    assert first["leads_group"] and second["leads_group"]
    assert not first["task_module_imported"]  # the served module runs only as __main__
    unlike_a_fork = {"preloaded", "pid", "random"}
    assert {k: v for k, v in first.items() if k not in unlike_a_fork} == {
        k: v for k, v in fresh.items() if k not in unlike_a_fork
    }
    assert first["stdin"] == "/dev/null" and first["python_threads"] == 1
    assert first["blas_works"]  # numpy's BLAS threads after a fork


def test_signals_the_client_ignores_stay_ignored_as_across_an_exec(server, tmp_path):
    # Under `nohup`, or in a shell's background job, SIGHUP and SIGINT are ignored, and a
    # fresh process inherits that; a forked one must too (it used to get the defaults).
    env = replica_environment(tmp_path, "1")
    ignoring = {signal.SIGINT: signal.SIG_IGN, signal.SIGHUP: signal.SIG_IGN}
    handling = {signal.SIGINT: signal.default_int_handler, signal.SIGHUP: signal.SIG_DFL}
    states = {}
    saved = {sig: signal.getsignal(sig) for sig in ignoring}
    try:
        for name, dispositions in (("ignoring", ignoring), ("handling", handling)):
            for sig, handler in dispositions.items():
                signal.signal(sig, handler)
            forked, code = forked_state(server, env, "one")
            assert code == 0
            states[name] = forked["signals"], fresh_state(env, "one")["signals"]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    for forked_signals, fresh_signals in states.values():
        assert forked_signals == fresh_signals
    forked_signals = states["ignoring"][0]
    assert forked_signals["SIGINT"] == forked_signals["SIGHUP"] == str(signal.SIG_IGN)
    assert forked_signals["SIGTERM"] == str(signal.SIG_DFL)
    forked_signals = states["handling"][0]
    assert forked_signals["SIGINT"] == str(signal.default_int_handler)
    assert forked_signals["SIGHUP"] == str(signal.SIG_DFL)


def test_exit_codes_and_signals_come_back_as_from_popen(server, tmp_path):
    env = replica_environment(tmp_path, "x")
    assert forked_state(server, env, "exit", "3")[1] == 3
    child = server.spawn(probe_argv("raise", "boom"), env, str(ROOT))
    assert isinstance(child, ForkedProcess)
    output = child.stdout.read().decode()
    assert child.wait(30) == 1 and "RuntimeError: boom" in output
    sleeper = server.spawn(probe_argv("sleep", "60"), env, str(ROOT))
    assert isinstance(sleeper, ForkedProcess)
    sleeper.stdout.readline()
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(0.2)
    os.killpg(sleeper.pid, signal.SIGTERM)  # the executor signals the replica's group
    assert sleeper.wait(10) == -signal.SIGTERM


def test_a_child_that_exits_before_its_pid_is_read_is_still_received(server, tmp_path):
    """Its `{"pid"}` and `{"returncode"}` lines may come in one read (CI saw this race)."""
    env = replica_environment(tmp_path, "q")
    sent = server.send(probe_argv("exit", "4"), env, str(ROOT))
    assert isinstance(sent, fork_client.Request), sent
    deadline = time.monotonic() + 30
    while sent.conn.recv(4096, socket.MSG_PEEK).count(b"\n") < 2:  # both lines queued
        assert time.monotonic() < deadline, "the child's exit never came"
        time.sleep(0.02)
    child = server.receive(sent)
    assert isinstance(child, ForkedProcess), child
    assert child.poll() == 4 and child.wait(1) == 4
    assert json.loads(child.stdout.read().decode().splitlines()[0])["argv"] == ["exit", "4"]


def test_a_request_that_a_fresh_process_would_see_differently_is_refused(server, tmp_path):
    env = replica_environment(tmp_path, "r")
    changed = server.spawn(probe_argv(), {**env, "TF_ENABLE_ONEDNN_OPTS": "0"}, str(ROOT))
    assert changed == ("environment differs from the preloaded server's: TF_ENABLE_ONEDNN_OPTS")
    (tmp_path / "numpy.py").write_text("")  # a fresh process here would import this numpy
    shadowing = server.spawn(probe_argv(), env, str(tmp_path))
    assert shadowing == f"working directory {tmp_path} shadows preloaded modules: numpy"
    other = server.spawn([sys.executable, "-m", "trainer.task"], env, str(ROOT))
    assert isinstance(other, str) and other.startswith("not `python -m` of a preloaded module")


def test_a_stale_pwd_does_not_cost_the_fork_and_the_child_gets_the_requested_one(server, tmp_path):
    """A wrapper that changes directory without updating PWD: still forked, env exact."""
    env = {**replica_environment(tmp_path, "p"), "PWD": "/elsewhere", "OLDPWD": "/before"}
    state, code = forked_state(server, env)
    assert code == 0 and state["preloaded"]
    assert state["env"] == env


def test_per_replica_variables_are_exactly_those_the_executor_sets(tmp_path, monkeypatch):
    """Every variable `plan_replicas` sets per replica may differ from the server's."""
    monkeypatch.setenv(fork_client.ENV, "some-address")
    pools = [
        {
            "machine_spec": {"machine_type": "n1-standard-4", "accelerator_count": 2},
            "replica_count": 1,
            "container_spec": {"image_uri": "local", "command": ["python", "-m", "trainer.task"]},
        }
    ] * 2
    replicas = local_job.plan_replicas(
        pools, base_output_directory=str(tmp_path), trial_id="7", log_dir=str(tmp_path)
    )
    base = replica_env.base_env()
    for replica in replicas:
        differing = {k for k in set(replica.env) | set(base) if replica.env.get(k) != base.get(k)}
        assert differing and all(fork_server.per_replica(k) for k in differing), differing
    assert not fork_server.per_replica("TF_ENABLE_ONEDNN_OPTS")
    assert not fork_server.per_replica("TMPX") and fork_server.per_replica("TMP")
    assert fork_server.per_replica("AIP_ANYTHING") and not fork_server.per_replica("TF_CONFIGX")


def test_the_kfp_executors_marker_is_not_passed_to_replicas(monkeypatch):
    monkeypatch.setenv("_KFP_RUNTIME", "true")
    assert "_KFP_RUNTIME" not in replica_env.base_env()


LIFELINE = """
import sys, time
from pipelines.jobs.fork_client import ForkServer
server = ForkServer.start(cwd=sys.argv[1], modules=("tests.fork_probe",))
assert server.ready(60), server.unavailable
child = server.spawn([sys.executable, "-m", "tests.fork_probe", "sleep", "120"], eval(sys.argv[2]),
                     sys.argv[1])
child.stdout.readline()
print(server.process.pid, child.pid, flush=True)
time.sleep(120)
"""


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_when_the_executor_dies_the_server_and_its_children_die(tmp_path):
    env = replica_environment(tmp_path, "l")
    owner = subprocess.Popen(
        [sys.executable, "-c", LIFELINE, str(ROOT), repr(env)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
    )
    try:
        server_pid, child_pid = map(int, owner.stdout.readline().split())
        owner.kill()  # no clean-up code runs: only the lifeline and PR_SET_PDEATHSIG
        owner.wait()
        assert gone(server_pid, 10) and gone(child_pid, 10)
    finally:
        owner.kill()


def test_a_child_dies_when_its_requester_drops_the_request(server, tmp_path):
    env = replica_environment(tmp_path, "d")
    child = server.spawn(probe_argv("sleep", "120"), env, str(ROOT))
    assert isinstance(child, ForkedProcess)
    child.stdout.readline()
    child._conn.close()  # what the requesting process's exit does
    assert gone(child.pid, 10)


def test_forking_off_or_nothing_served_means_no_server(monkeypatch):
    with fork_client.session([[sys.executable, "-m", "other"]]) as server:
        assert server is None
    monkeypatch.setenv(fork_client.ENV, fork_client.OFF)
    with fork_client.session([[sys.executable, "-m", "trainer.task"]]) as server:
        assert server is None
    monkeypatch.setenv(fork_client.ENV, "an-address")
    with fork_client.session([[sys.executable, "-m", "trainer.task"]]) as server:
        assert server is not None and server.address == "an-address" and server.process is None


def test_what_one_preload_blocks_the_next_served_module_can_import(tmp_path, monkeypatch):
    """`trainer.task` blocks imports TensorFlow need not make; evaluation, next, needs one."""
    (tmp_path / "probe_blocker.py").write_text(
        "import sys\n\ndef preload():\n    sys.modules.setdefault('probe_needed', None)\n"
    )
    (tmp_path / "probe_needed.py").write_text("VALUE = 1\n")
    (tmp_path / "probe_needer.py").write_text("import probe_needed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("probe_blocker", "probe_needed", "probe_needer"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    server = fork_server.Server(f"\0hpt-test-{os.getpid()}", ["probe_blocker", "probe_needer"])
    try:
        for name in server.modules:
            server.preload_module(name)
    finally:
        server.listener.close()
    assert sys.modules["probe_needed"].VALUE == 1
    assert "probe_needer" not in sys.modules  # a child runs it as __main__
    monkeypatch.delitem(sys.modules, "probe_needed")


STAGED_PROBE = """
import gc, os, sys, time

def preload():
    if {gate!r}:
        deadline = time.monotonic() + 60
        while not os.path.exists({gate!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
    if {broken}:
        raise RuntimeError("cannot")

if __name__ == "__main__":
    print({name!r}, "collector", "on" if gc.isenabled() else "off", flush=True)
"""


def test_each_module_is_served_as_soon_as_it_is_preloaded(tmp_path):
    """The preparation step need not wait for evaluation's imports; a failed preload refuses."""
    modules = ("probe_first", "probe_held", "probe_gated", "probe_broken")
    gates = {"probe_held": tmp_path / "go-held", "probe_gated": tmp_path / "go-gated"}
    for name in modules:
        gate = str(gates.get(name, ""))
        broken = name == "probe_broken"
        source = STAGED_PROBE.format(gate=gate, broken=broken, name=name)
        (tmp_path / f"{name}.py").write_text(source)
    env = replica_env.base_env()
    env.pop("PYTEST_CURRENT_TEST", None)
    server = ForkServer.start(
        cwd=str(tmp_path), log_path=str(tmp_path / "server.log"), modules=modules, env=env
    )

    def send(name: str) -> fork_client.Request:
        sent = server.send([sys.executable, "-m", name], env, str(tmp_path))
        assert isinstance(sent, fork_client.Request), sent
        return sent  # queued at the server from here on

    try:
        assert server.ready(60), server.unavailable  # the first module is in
        first_sent, gated_sent = send("probe_first"), send("probe_gated")
        gates["probe_held"].touch()  # probe_held is in: what was asked for meanwhile is served
        first = server.receive(first_sent)
        assert isinstance(first, ForkedProcess), first
        # Its child ran to the end while probe_gated's preload still waits for its gate.
        assert first.stdout.read().decode().split() == ["probe_first", "collector", "on"]
        assert select.select([gated_sent.conn], [], [], 0.3)[0] == []  # not answered yet
        gates["probe_gated"].touch()
        gated = server.receive(gated_sent)
        assert isinstance(gated, ForkedProcess), gated
        assert gated.stdout.read().decode().split() == ["probe_gated", "collector", "on"]
        assert (first.wait(30), gated.wait(30)) == (0, 0)
        broken = server.spawn([sys.executable, "-m", "probe_broken"], env, str(tmp_path))
        assert broken == "preloading probe_broken failed (RuntimeError: cannot)"
    finally:
        for gate in gates.values():
            gate.touch()
        server.close()
