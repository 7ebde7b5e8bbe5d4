"""An interrupted run is not a failed trial: its running trials are rerun on resume, never counted.

The study runs in a child of a stand-in "run" process, as the tune step runs under
`hpt-pipeline run`; the run is then killed (`kill -9`) or the study signalled (SIGTERM,
SIGHUP), with a failure budget of 1 so that one wrongly counted trial would stop the study.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.study import interruption, progress_lines
from pipelines.study import trials as tl
from pipelines.study.trials import TrialState
from pipelines.targets.local.local_study import run_study
from tests.conftest import ROOT
from tests.test_local_study import SPACE, fake_specs, ledger, processes_mentioning

RUN = textwrap.dedent(
    """
    import subprocess, sys
    study = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    print(study.pid, flush=True)
    study.wait()
    """
)
STUDY = textwrap.dedent(
    """
    import json, signal, sys
    from pipelines.targets.local.local_study import run_study
    # As under a terminal: a test run started as a background job (CI, `make test &`)
    # inherits SIGINT ignored (Python then installs no KeyboardInterrupt handler), and one
    # under `nohup` SIGHUP ignored, which the study rightly leaves alone.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    run_study(**json.load(open(sys.argv[1])), show_progress=False)
    """
)


def payload(tmp_path: Path) -> dict:
    book = tmp_path / "ledger.jsonl"
    return {
        "worker_pool_specs": fake_specs("--epochs=4", "--sleep=0.5", f"--ledger={book}"),
        "study_spec_metrics": SPACE.to_study_spec_metrics(),
        "study_spec_parameters": SPACE.to_study_spec_parameters(),
        "max_trial_count": 4,
        "parallel_trial_count": 2,
        "max_failed_trial_count": 1,  # one trial wrongly failed would stop the study
        "base_output_directory": str(tmp_path / "study"),
        "seed": 0,
    }


def start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], int, dict]:
    """The stand-in run and its study child, once the study has trials running."""
    values = payload(tmp_path)
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(values))
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, STUDY, str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert run.stdout is not None
    study_pid = int(run.stdout.readline())
    trials_file = Path(values["base_output_directory"]) / tl.TRIALS_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if trials_file.exists() and any(
            tl.trial_state(t) == TrialState.ACTIVE for t in tl.read_trials(str(trials_file))
        ):
            time.sleep(0.5)  # the trial processes have started
            return run, study_pid, values
    run.kill()
    pytest.fail("the study started no trial")


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"process {pid} outlived the interruption")


def check_interrupted_then_resume(values: dict) -> None:
    base = Path(values["base_output_directory"])
    book = base.parent / "ledger.jsonl"
    after = tl.read_trials(str(base / tl.TRIALS_FILE))
    assert TrialState.INFEASIBLE not in {tl.trial_state(t) for t in after}
    stopped = [t for t in after if tl.trial_state(t) == TrialState.ACTIVE]
    assert stopped, "the interruption stopped no running trial"
    assert progress_lines.counts(after)["failed"] == 0
    assert not processes_mentioning(str(book)), "trial processes outlived the interruption"

    trials = run_study(**values, show_progress=False)  # resume: the same call

    assert [tl.trial_state(t) for t in trials] == [TrialState.SUCCEEDED] * 4
    runs = ledger(book)
    for t in stopped:  # rerun with the same parameters
        assert [r["params"] for r in runs if r["trial"] == t["id"]] == [tl.trial_parameters(t)]


def test_kill_9_of_the_run_keeps_its_trials_to_rerun_and_counts_no_failure(tmp_path):
    run, study_pid, values = start_run(tmp_path)
    run.kill()  # SIGKILL to the top process: the study is orphaned
    run.wait()
    wait_gone(study_pid)
    after = tl.read_trials(str(Path(values["base_output_directory"]) / tl.TRIALS_FILE))
    marked = [t for t in after if (t.get(tl.LOCAL_KEY) or {}).get("interrupted")]
    assert marked and all("run stopped" in t[tl.LOCAL_KEY]["interrupted"] for t in marked)
    check_interrupted_then_resume(values)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_to_the_study_keeps_its_trials_to_rerun(tmp_path, sig):
    """SIGHUP is a closed terminal: the study is told as directly as by SIGTERM or Ctrl-C."""
    run, study_pid, values = start_run(tmp_path)
    os.kill(study_pid, sig)
    run.wait(timeout=60)
    base, why = Path(values["base_output_directory"]), f"the run got {signal.Signals(sig).name}"
    after = tl.read_trials(str(base / tl.TRIALS_FILE))
    stopped = [t for t in after if tl.trial_state(t) == TrialState.ACTIVE]
    assert stopped and {tl.trial_outcome(t) for t in stopped} == {"interrupted"}  # not running
    assert {t[tl.LOCAL_KEY]["interrupted"] for t in stopped} == {why}
    assert json.loads((base / "study.json").read_text())["stopReason"] == f"interrupted: {why}"
    check_interrupted_then_resume(values)


def test_a_trial_killed_by_a_signal_while_the_run_lives_is_a_failure():
    stopped: list[bool] = []
    watch = interruption.RunWatch(lambda: stopped.append(True))
    assert watch.stopped_by_run(-signal.SIGKILL) is False  # the OOM killer: a real failure
    assert watch.stopped_by_run(3) is False  # the trainer's own exit code
    assert not stopped
    watch.interrupt("the run got SIGTERM")
    assert watch.stopped_by_run(3) is True and stopped == [True]


# The run's step: a RunWatch judges a trial killed by SIGKILL while the run (its parent)
# is still alive; the run dies a moment later, as the trainer dies just before the run.
JUDGE = textwrap.dedent(
    """
    import signal, sys
    from pipelines.study import interruption
    watch = interruption.RunWatch(lambda: None)
    print("ready", flush=True)
    verdict = watch.stopped_by_run(-signal.SIGKILL)
    open(sys.argv[1], "w").write(str(verdict))
    """
)
DIES_SOON = textwrap.dedent(
    """
    import subprocess, sys, time
    step = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                            stdout=subprocess.PIPE, text=True)
    assert step.stdout.readline() == "ready\\n"
    time.sleep(0.3)  # the trial's signal death reaches the step first; then the run dies
    """
)


def test_a_trial_killed_a_moment_before_the_run_dies_is_interrupted_not_failed(tmp_path):
    verdict = tmp_path / "verdict"
    subprocess.run(
        [sys.executable, "-c", DIES_SOON, JUDGE, str(verdict)], cwd=ROOT, check=True, timeout=60
    )
    deadline = time.monotonic() + 30
    while not verdict.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.1)
    assert verdict.read_text() == "True"


# A stand-in `hpt-pipeline run`: one step that records the signal it gets, under `forwarded`.
FORWARDING_RUN = textwrap.dedent(
    """
    import subprocess, sys
    from pipelines.app import interrupts
    step = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                            stdout=subprocess.PIPE, text=True)
    assert step.stdout.readline() == "ready\\n"
    try:
        with interrupts.forwarded(keep=set()) as signalled:
            print("forwarding", flush=True)
            step.wait()
    except interrupts.RunInterrupted as stopped:
        interrupts.wait_for(signalled, 30)
        sys.exit(interrupts.exit_code(stopped))
    """
)
STEP = textwrap.dedent(
    """
    import signal, sys, time
    def record(signum, frame):
        open(sys.argv[1], "w").write(signal.Signals(signum).name)
        sys.exit(0)
    signal.signal(signal.SIGTERM, record)
    print("ready", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_run_tells_its_steps_with_sigterm_so_they_record_their_trials(tmp_path, sig):
    told = tmp_path / "told"
    run = subprocess.Popen(
        [sys.executable, "-c", FORWARDING_RUN, STEP, str(told)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None and run.stdout.readline() == "forwarding\n"
    run.send_signal(sig)
    assert run.wait(timeout=60) == 128 + sig
    assert (told.read_text() if told.exists() else "no signal it could catch") == "SIGTERM"


def test_a_trial_line_says_interrupted_not_failed():
    trial = tl.make_trial(
        "2",
        {"momentum": 0.5},
        state=TrialState.ACTIVE,
        local={"interrupted": "the run got SIGTERM"},
    )
    line = progress_lines.trial_line(trial)
    assert line.startswith("trial 2 interrupted (the run got SIGTERM): rerun on resume")
