"""MLflow tracking against the real thing: a tracking server on loopback, read back by MlflowClient.

The server is `mlflow server` with a SQLite backend, started by this module and stopped at
its end; every check reads what a user's `MlflowClient` (or the UI) would read.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.study import trials as trials_lib
from pipelines.tracking import runs, steps, store, writer
from pipelines.tracking.store import Store, TrackingError

SERVER_START_S = 180.0  # `mlflow server` on two shared cores: imports, migrations, uvicorn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An MLflow tracking server on 127.0.0.1 (SQLite backend, artifacts proxied); its URI."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    mlflow = Path(sys.executable).with_name("mlflow")
    command = [
        str(mlflow),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(root / "server.log", "w")  # noqa: SIM115 - closed at the fixture's end
    env = {**os.environ, "TMPDIR": str(root)}  # MLflow leaves its db_init_lock file there
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while store.unreachable(uri):
            assert process.poll() is None, (root / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, f"no server at {uri} after {SERVER_START_S} s"
            time.sleep(0.5)
        yield uri
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def make_trials(tmp_path: Path) -> list[dict[str, Any]]:
    """Two trials as a study writes them: one succeeded over 3 epochs (with its log), one failed."""
    log = tmp_path / "chief-0.log"
    log.write_text("epoch 1\nepoch 2\nepoch 3\n")
    history = [(1, 0.5, 0.9), (2, 0.75, 0.6), (3, 0.625, 0.7)]
    good = trials_lib.make_trial(
        "1",
        {"learning_rate": 0.01, "num_units": 128, "optimizer": "sgd"},
        state=trials_lib.TrialState.SUCCEEDED,
        final_measurement=trials_lib.measurement(2, {"val_accuracy": 0.75, "val_loss": 0.6}),
        measurements=[
            trials_lib.measurement(step, {"val_accuracy": acc, "val_loss": loss}, step * 1.5)
            for step, acc, loss in history
        ],
        start_time="2026-01-01T10:00:00.000000Z",
        end_time="2026-01-01T10:00:05.000000Z",
        local={"logPath": str(log), "earlyStopped": False},
    )
    bad = trials_lib.make_trial(
        "2",
        {"learning_rate": 0.5, "num_units": 64, "optimizer": "adam"},
        state=trials_lib.TrialState.INFEASIBLE,
        measurements=[trials_lib.measurement(1, {"val_accuracy": 0.1, "val_loss": 9.0}, 1.0)],
        start_time="2026-01-01T10:00:00.000000Z",
        end_time="2026-01-01T10:00:02.000000Z",
        infeasible_reason="the trainer exited with 1",
        local={"exitCode": 1},
    )
    return [good, bad]


def histories(c: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in c.get_metric_history(run_id, key))


def expected(trial: dict[str, Any], key: str) -> list[tuple[int, float]]:
    return sorted(
        (int(m["stepCount"]), trials_lib.measurement_metrics(m)[key]) for m in trial["measurements"]
    )


def children(c: Any, experiment_id: str, parent: str) -> list[Any]:
    return c.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")


def test_a_study_on_a_server_is_one_run_with_a_nested_run_per_trial(server, tmp_path):
    trials = make_trials(tmp_path)
    space = [{"parameter_id": "learning_rate", "double_value_spec": {"min_value": 1e-4}}]
    tracked = runs.write_study(
        store.open_store("mlflow", server),
        trials,
        experiment="hpt-test-nesting",
        pipeline_run="/runs/latest/artifacts/hpt-pipeline-2026",
        target="local",
        dataset_fingerprint="abc123",
        search_space=space,
    )
    c = client(server)
    study = c.get_run(tracked["mlflow_run_id"])
    assert study.data.tags["hpt.kind"] == "study"
    assert study.data.tags["hpt.pipeline_run"] == "/runs/latest/artifacts/hpt-pipeline-2026"
    assert study.data.tags["hpt.target"] == "local"
    assert study.data.tags["hpt.dataset_fingerprint"] == "abc123"
    assert '"parameter_id": "learning_rate"' in study.data.tags["hpt.search_space"]
    assert study.info.status == "FINISHED"
    assert [a.path for a in c.list_artifacts(study.info.run_id)] == ["search_space.json"]
    nested = {
        r.data.tags["hpt.trial_id"]: r
        for r in children(c, tracked["mlflow_experiment_id"], study.info.run_id)
    }
    assert sorted(nested) == ["1", "2"]
    for trial in trials:
        run = nested[trial["id"]]
        assert run.data.params == {k: str(v) for k, v in trials_lib.trial_parameters(trial).items()}
        for key in ("val_accuracy", "val_loss"):
            assert histories(c, run.info.run_id, key) == expected(trial, key)
        assert run.data.tags["hpt.outcome"] == trials_lib.trial_outcome(trial)
        assert run.data.tags["hpt.origin"] == "this run"
    good, bad = nested["1"], nested["2"]
    assert good.info.status == "FINISHED" and bad.info.status == "FAILED"
    assert histories(c, good.info.run_id, "final_val_accuracy") == [(2, 0.75)]  # the selected one
    assert bad.data.tags["hpt.reason"] == "the trainer exited with 1"
    assert [a.path for a in c.list_artifacts(good.info.run_id)] == ["chief-0.log"]
    assert good.info.start_time == int(trials_lib.parse_timestamp(trials[0]["startTime"]) * 1000)


def test_under_kfps_task_run_the_study_nests_there(server, tmp_path):
    """KFP 2.17+ sets MLFLOW_TRACKING_URI and MLFLOW_RUN_ID (the task's run): the study nests."""
    c = client(server)
    kfp_experiment = c.create_experiment("kfp-pipeline-run-stand-in")
    task_run = c.create_run(kfp_experiment, run_name="tune-on-katib").info.run_id
    env = {store.URI_ENV: server, store.RUN_ENV: task_run}
    opened = store.open_store("auto", "", env=env)
    assert opened == Store(server, task_run, "")
    tracked = runs.write_study(
        opened, make_trials(tmp_path), experiment="ignored", pipeline_run="r", target="kubeflow"
    )
    assert tracked["mlflow_experiment_id"] == kfp_experiment  # a nested run shares its parent's
    study = c.get_run(tracked["mlflow_run_id"])
    assert study.data.tags["mlflow.parentRunId"] == task_run
    assert len(children(c, kfp_experiment, study.info.run_id)) == 2
    # A tracking_uri of the user's own is not KFP's store: no parent there.
    assert store.open_store("auto", server + "/", env=env).parent_run_id == ""


def test_the_kubeflow_tune_step_nests_its_trials_under_kfps_run(server, tmp_path, monkeypatch):
    from pipelines.targets.kubeflow import katib_tune, kube
    from pipelines.targets.kubeflow.steps.tune import tune_on_katib
    from tests import test_kubeflow_katib as k
    from tests.fake_kube import Cluster

    c = client(server)
    kfp_experiment = c.create_experiment("kfp-tune-step")
    task_run = c.create_run(kfp_experiment, run_name="tune-on-katib").info.run_id
    monkeypatch.setenv(store.URI_ENV, server)
    monkeypatch.setenv(store.RUN_ENV, task_run)
    api = k.FakeCustomObjects([k.RUNNING, k.SUCCEEDED], k.KATIB_TRIALS)
    monkeypatch.setattr(kube, "custom_objects_api", lambda: api)
    monkeypatch.setattr(kube, "core_v1_api", lambda: Cluster().core)
    monkeypatch.setattr(katib_tune, "DEFAULT_POLL_S", 0.001)
    args = k.component_args(tmp_path)
    args["trials"].uri = "gs://root/run-42/tune-on-katib/trials"
    tune_on_katib.python_func(**args)
    written = trials_lib.read_trials(args["trials"].path)
    meta = args["trials"].metadata
    assert meta["tracking_uri"] == server and meta["mlflow_experiment_id"] == kfp_experiment
    study = c.get_run(meta["mlflow_run_id"])
    assert study.data.tags["mlflow.parentRunId"] == task_run
    assert study.data.tags["hpt.pipeline_run"] == "gs://root/run-42"
    nested = children(c, kfp_experiment, study.info.run_id)
    assert sorted(r.data.tags["hpt.trial_id"] for r in nested) == [t["id"] for t in written]
    finals = 0
    for run in nested:  # Katib keeps a trial's final observation (no per-epoch measurements)
        trial = next(t for t in written if t["id"] == run.data.tags["hpt.trial_id"])
        final = trial.get("finalMeasurement")
        for key, value in trials_lib.measurement_metrics(final).items():
            step = int(final.get("stepCount", 0))
            assert histories(c, run.info.run_id, f"final_{key}") == [(step, value)]
            finals += 1
        assert run.data.params == {k: str(v) for k, v in trials_lib.trial_parameters(trial).items()}
    assert finals >= 1


def test_the_final_jobs_run_joins_the_studys_store(server, tmp_path):
    tracked = runs.write_study(
        store.open_store("mlflow", server),
        make_trials(tmp_path),
        experiment="hpt-test-final",
        pipeline_run="r",
        target="local",
    )
    final = runs.record_final(
        tracked, params={"learning_rate": 0.01}, metrics={"test_accuracy": 0.8}, tags={}
    )
    c = client(server)
    run = c.get_run(final)
    assert run.info.experiment_id == tracked["mlflow_experiment_id"]
    assert run.data.tags["hpt.kind"] == "final"
    assert run.data.tags["hpt.study_run_id"] == tracked["mlflow_run_id"]
    assert run.data.params == {"learning_rate": "0.01"} and run.data.metrics == {
        "test_accuracy": 0.8
    }
    assert runs.card_entry(tracked, final) == {"mlflow_run_id": final, "tracking_uri": server}
    assert runs.record_final({}, params={}, metrics={}, tags={}) == ""  # an untracked study
    assert steps.FinalTracking({}).record(params={}, metrics={}, tags={}) == {}
    assert runs.card_entry({}, "") == {}


def test_an_unreachable_server_fails_mlflow_before_anything_and_is_said_under_auto():
    uri = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with pytest.raises(TrackingError) as err:
        store.open_store("mlflow", uri, env={})
    assert str(err.value).startswith(f"tracking_uri={uri}: is unreachable")
    assert "\n" not in str(err.value)
    said: list[str] = []
    assert store.open_store("auto", uri, env={}, say=said.append) is None
    assert len(said) == 1 and said[0].startswith(f"tracking: {uri} is unreachable")
    assert said[0].endswith("this run goes on untracked (tracking=auto)")


def test_mlflow_with_no_store_anywhere_is_refused_and_auto_is_quiet():
    with pytest.raises(TrackingError, match="tracking=mlflow: no tracking_uri set and no "):
        store.open_store("mlflow", "", env={})
    said: list[str] = []
    assert store.open_store("auto", "", env={}, say=said.append) is None and said == []
    assert store.open_store("off", "http://127.0.0.1:1", env={}, say=said.append) is None
    assert said == []  # off: not even checked


def test_a_write_that_fails_midway_never_fails_the_study(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own backoff: minutes
    said: list[str] = []
    gone = Store(f"http://127.0.0.1:{_free_port()}")  # reachable at the start, gone since
    assert (
        runs.record_study(
            gone, [], say=said.append, experiment="e", pipeline_run="r", target="local"
        )
        == {}
    )
    assert len(said) == 1 and said[0].startswith(
        f"tracking: writing the study's runs to {gone.uri} failed"
    )


def test_the_local_default_store_is_sqlite_in_the_run_folder(tmp_path):
    uri = store.local_default(str(tmp_path / "run"))
    assert uri == f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}"
    opened = store.open_store("auto", uri, env={})
    assert opened is not None and opened.artifact_root == str(tmp_path / "run" / "mlflow-artifacts")
    assert opened.ui_command() == f"mlflow ui --backend-store-uri {uri}"


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"tracking": "mlflow"}, "tracking=mlflow: the vertex target writes no MLflow runs yet"),
        (
            {"tracking_uri": "http://mlflow:5000"},
            "tracking_uri=http://mlflow:5000: the vertex target writes no MLflow runs yet",
        ),
    ],
)
def test_a_target_whose_tune_step_writes_no_runs_refuses_tracking(tmp_path, overrides, said):
    from pipelines.settings import Settings, SettingsError
    from tests.test_pipeline_spec import compiled

    with pytest.raises(SettingsError) as err:
        compiled(tmp_path, "vertex", Settings(**overrides))
    assert str(err.value).startswith(said) and "\n" not in str(err.value)
    spec = compiled(tmp_path, "vertex", Settings(tracking="off"))  # off asks for nothing
    assert "tracking" not in spec["root"]["inputDefinitions"]["parameters"]


@pytest.mark.parametrize(
    ("target", "task"), [("kubeflow", "tune-on-katib"), ("local", "tune-locally")]
)
def test_the_tune_step_takes_tracking_from_the_pipelines_parameters(tmp_path, target, task):
    from pipelines.settings import Settings
    from tests.test_pipeline_spec import compiled

    spec = compiled(
        tmp_path, target, Settings(tracking="mlflow", tracking_uri="http://mlflow:5000")
    )
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert parameters["tracking"]["defaultValue"] == "mlflow"
    assert parameters["tracking_uri"]["defaultValue"] == "http://mlflow:5000"
    tune = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    assert tune["tracking"] == {"componentInputParameter": "tracking"}
    assert tune["tracking_uri"] == {"componentInputParameter": "tracking_uri"}


def test_run_refuses_an_unreachable_store_under_mlflow_before_any_work(tmp_path):
    from tests.test_local_cli import _one_line_error

    uri = f"http://127.0.0.1:{_free_port()}"
    out = tmp_path / "o"
    args = ["run", "--tracking", "mlflow", "--tracking-uri", uri, "--output", str(out)]
    _one_line_error(args, f"tracking_uri={uri}: is unreachable")
    _one_line_error(["run", "--tracking", "wandb"], "tracking='wandb': expected one of auto, ")
    assert not out.exists()


def test_run_under_auto_says_an_unreachable_store_in_one_note_and_goes_on(tmp_path):
    from pipelines.settings import LOCAL_RUN_DEFAULTS, Settings
    from pipelines.targets.local.cli.commands import preflight

    uri = f"http://127.0.0.1:{_free_port()}"
    settings = Settings(**LOCAL_RUN_DEFAULTS, output=str(tmp_path / "o"), tracking_uri=uri)
    notes = [n for n in preflight(settings) if n.startswith("tracking")]
    assert notes == [
        f"tracking: {uri} is unreachable ([Errno 111] Connection refused); "
        "this run goes on untracked (tracking=auto)"
    ]
    assert preflight(settings.replace(tracking="off", tracking_uri=None)) == []


STEP = """
import json, sys, types
from pipelines.tracking import steps
from tests.test_tracking import make_trials
from pathlib import Path

folder = Path(sys.argv[1])
output = types.SimpleNamespace(uri="runs/latest/artifacts/r1/tune-locally/trials", metadata={})
tracker = steps.StudyTracking("auto", "sqlite:///" + str(folder / "run" / "mlflow.db"))
tracker.record(output, make_trials(folder), experiment="e", target="local")
card = steps.FinalTracking(output.metadata).record(
    params={"learning_rate": 0.01}, metrics={"test_accuracy": 0.8}, tags={"hpt.model": "m"}
)
print(json.dumps({"mlflow_imported": "mlflow" in sys.modules, "study": output.metadata,
                  "card": card}))
"""


def test_a_tracked_step_writes_its_runs_without_importing_mlflow_itself(tmp_path):
    """The tune and evaluate steps hand their writes to a writer process (MLflow's import and a
    new store's migrations cost seconds of CPU): the step's own process never imports MLflow,
    and the store a user opens holds the study, its trials and the final job's run."""
    done = subprocess.run(
        [sys.executable, "-c", STEP, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "TMPDIR": str(tmp_path)},  # MLflow's db_init_lock file
        check=True,
    )
    said, answer = done.stdout.strip().splitlines()[-2:]
    result = json.loads(answer)
    assert result["mlflow_imported"] is False
    study = result["study"]
    uri = f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}"
    ui = f"mlflow ui --backend-store-uri {uri}"
    assert said == f"tracking: study run {study['mlflow_run_id']}; see it with {ui}"
    c = client(uri)
    assert len(children(c, study["mlflow_experiment_id"], study["mlflow_run_id"])) == 2
    final = c.get_run(result["card"]["mlflow_run_id"])
    assert result["card"]["tracking_uri"] == uri
    assert final.data.tags["hpt.study_run_id"] == study["mlflow_run_id"]
    assert final.data.metrics == {"test_accuracy": 0.8}
    logs = list((tmp_path / "run" / "mlflow-artifacts").rglob("chief-0.log"))  # not ./mlruns
    assert [p.read_text() for p in logs] == ["epoch 1\nepoch 2\nepoch 3\n"]


def test_a_writer_starved_at_low_priority_is_replaced_and_the_study_is_written(
    tmp_path, monkeypatch
):
    """On a busy host a nice-19 writer may not have imported MLflow when the trials end: the
    step then writes through a writer at normal priority instead of waiting on the starved one."""
    started: list[subprocess.Popen[bytes]] = []
    real_start = writer._start

    def start(uri: str, nice: bool) -> subprocess.Popen[bytes]:
        # the niced writer never gets the CPU: a process that never says it is ready
        process = (
            subprocess.Popen(["sleep", "600"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            if nice
            else real_start(uri, nice)
        )
        started.append(process)
        return process

    monkeypatch.setattr(writer, "_start", start)
    monkeypatch.setattr(writer, "WRITE_TIMEOUT_S", 120.0)  # a hang guard, not a measure
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # MLflow's db_init_lock file
    opened = store.open_store("mlflow", store.local_default(str(tmp_path / "run")), env={})
    said: list[str] = []
    tracked = runs.record_study(
        opened,
        make_trials(tmp_path),
        say=said.append,
        writer=writer.Writer(opened.uri),
        experiment="e",
        pipeline_run="r",
        target="local",
    )
    assert said == [
        f"tracking: study run {tracked.get('mlflow_run_id')}; see it with {opened.ui_command()}"
    ]
    assert [p.args[0] for p in started] == ["sleep", sys.executable]
    assert started[0].returncode is not None  # the starved one was stopped, not left behind
    c = client(opened.uri)
    assert len(children(c, tracked["mlflow_experiment_id"], tracked["mlflow_run_id"])) == 2


def test_the_evaluate_steps_writer_warms_up_at_the_steps_own_priority(tmp_path, monkeypatch):
    """Issue 52/55, `make run`'s time: beside a second or two of scoring a nice-19 writer was
    never ready, so it was replaced and MLflow imported twice on the run's critical path."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # MLflow's db_init_lock file
    final = steps.FinalTracking(
        {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "mlflow_run_id": "study"}
    )
    assert final.writer is not None
    try:
        assert final.writer._ready(120.0)  # said it is ready: past any renice of its own
        process = final.writer._process.pid
        assert os.getpriority(os.PRIO_PROCESS, process) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        final.writer.close()


def test_a_relative_sqlite_store_is_the_users_folder_not_the_steps(tmp_path, monkeypatch):
    from pipelines.settings import Settings
    from pipelines.targets.local.cli.preflight import tracking_uri

    monkeypatch.chdir(tmp_path)
    given = Settings(tracking_uri="sqlite:///team/mlflow.db?timeout=30")
    assert tracking_uri(given) == f"sqlite:///{tmp_path / 'team' / 'mlflow.db'}?timeout=30"
    assert store.absolute("http://mlflow:5000") == "http://mlflow:5000"
    assert store.absolute("sqlite:////abs/m.db") == "sqlite:////abs/m.db"


def test_a_store_whose_creator_died_mid_creation_is_made_whole_by_the_next_writer(tmp_path):
    """A starved writer killed while it creates the SQLite store (seen under load: its
    replacement failed every write with `index index_params_run_uuid already exists`)."""
    path = tmp_path / "mlflow.db"
    uri = f"sqlite:///{path}"
    dies = (  # a writer that dies after the first tables, before the migrations
        "import os, mlflow.store.db.utils as u\n"
        "u._upgrade_db = lambda engine: os._exit(9)\n"
        "from pipelines.tracking import runs\n"
        f"runs.open_client({uri!r})\n"
    )
    died = subprocess.run([sys.executable, "-c", dies], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    assert not path.exists()  # nothing half-made where the next writer looks
    client = runs.open_client(uri)
    run = client.create_run(client.create_experiment("study"))
    client.log_param(run.info.run_id, "learning_rate", "0.01")
    assert client.get_run(run.info.run_id).data.params == {"learning_rate": "0.01"}
    assert [p.name for p in tmp_path.glob("mlflow.db*")] == ["mlflow.db"]  # the dead one's gone


def test_the_kubeflow_register_step_tags_the_final_run_with_its_version(
    server, tmp_path, monkeypatch
):
    """As the local register step does: the final job's run names the version made from it."""
    from tests.test_kubeflow_register import artifact, register_on_the_claim

    tracked = runs.write_study(
        store.open_store("mlflow", server),
        make_trials(tmp_path),
        experiment="hpt-test-kfp-register",
        pipeline_run="r",
        target="kubeflow",
    )
    final = runs.record_final(tracked, params={}, metrics={"test_accuracy": 0.9}, tags={})
    evaluation = artifact(
        "minio://x/eval", test_accuracy=0.9, tracking=runs.card_entry(tracked, final)
    )
    registered = register_on_the_claim(monkeypatch, evaluation)
    tags = client(server).get_run(final).data.tags
    assert tags["hpt.registered_model"] == "hpt-cnn/run-7"  # Model Registry's version
    assert tags["hpt.registry_path"] == "pvc://hpt-data/run-7/model"
    assert registered.metadata["metrics"] == {"test_accuracy": 0.9}
