"""Cancelling a run stops the job its step started: the compiled command, SIGTERM, the API call.

Each test takes a step's exact container command and args from the compiled spec,
runs them through the image's shell (dash, the `sh` of python:3.11-slim-bookworm)
with an executor input as the backend writes it and only the cloud API replaced
(`tests/fake_apis/sitecustomize.py`), waits until the job exists and is being
waited on, then sends SIGTERM to the top process, as Kubernetes does to the
container's PID 1 when a run is cancelled, and reads which API calls were made.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components import base
from pipelines.compiler import compile_pipeline
from pipelines.jobs import worker_pools
from pipelines.study.search_space import default_search_space
from tests.test_pipeline_spec import for_target

ROOT = Path(__file__).resolve().parent.parent
FAKE_APIS = Path(__file__).resolve().parent / "fake_apis"
SHELL = shutil.which("dash") or "/bin/sh"  # the image's sh is dash
WAIT_S = 120.0
LOGS: dict[int, Path] = {}  # a step's process id → its output file


def compiled_executor(tmp_path: Path, target: str, executor: str) -> dict[str, Any]:
    path = compile_pipeline(target, for_target(target), tmp_path / f"{target}.yaml")
    spec = yaml.safe_load(Path(path).read_text())
    return spec["deploymentSpec"]["executors"][executor]["container"]  # type: ignore[no-any-return]


def study_values() -> dict[str, Any]:
    space = default_search_space()
    return dict(
        study_spec_metrics=space.to_study_spec_metrics(),
        study_spec_parameters=space.to_study_spec_parameters(),
        study_spec_algorithm="ALGORITHM_UNSPECIFIED",
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
        max_trial_count=12,
        parallel_trial_count=3,
        max_failed_trial_count=0,
        worker_pool_specs=worker_pools.trial_worker_pool_specs(
            image_uri="europe-docker.pkg.dev/p/r/trainer:v1",
            command=["python", "-m", "trainer.task"],
            args=["--data=gs://b/data"],
            machine_type="n1-standard-8",
            accelerator_type="NVIDIA_TESLA_T4",
            accelerator_count=2,
        ),
        base_output_directory="gs://b/root/study",
        early_stopping=False,
    )


def start(
    container: dict[str, Any],
    tmp_path: Path,
    api: str,
    parameters: dict[str, Any],
    outputs: dict[str, Any],
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], Path]:
    """Start the container's command + args as the backend would, the `api` replaced."""
    record = tmp_path / "record"
    record.mkdir()
    executor_input = {
        "inputs": {"parameterValues": parameters},
        "outputs": {**outputs, "outputFile": str(tmp_path / "executor_output.json")},
    }
    argv = [*container["command"], *container["args"]]
    argv = [a.replace("{{$}}", json.dumps(executor_input)) for a in argv]
    assert argv[0] == "sh"
    argv[0] = SHELL
    child_env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(FAKE_APIS), str(ROOT)]),
        "HPT_FAKE_API": api,
        "HPT_FAKE_RECORD": str(record),
        **(env or {}),
    }
    log_path = tmp_path / "step.log"
    with open(log_path, "w") as log:  # a file: an orphan cannot hold a pipe open
        proc = subprocess.Popen(
            argv, cwd=tmp_path, env=child_env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
    LOGS[proc.pid] = log_path
    return proc, record


def wait_until_waiting(proc: subprocess.Popen[str], record: Path) -> int:
    """The process id that waits on the job, once the job exists and its status was read."""
    deadline = time.monotonic() + WAIT_S
    while not (record / "waiting").exists():
        if proc.poll() is not None:
            pytest.fail(f"the step exited {proc.returncode} before waiting:\n{output(proc)}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the step did not reach its wait within {WAIT_S:g}s")
        time.sleep(0.1)
    return int((record / "waiting").read_text())


def output(proc: subprocess.Popen[str]) -> str:
    """What the step printed (stdout and stderr)."""
    return LOGS[proc.pid].read_text()


def cancel(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM to the top process (the container's PID 1); its exit code and output."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the step ignored SIGTERM for 60s:\n{output(proc)}")
    return proc.returncode, output(proc)


def calls(record: Path, call: str) -> list[dict[str, Any]]:
    path = record / f"{call}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def vertex_tune(tmp_path: Path, container: dict[str, Any]) -> tuple[subprocess.Popen[str], Path]:
    values = study_values()
    parameters = dict(
        values,
        display_name="hpt-pipeline-study",
        project="my-project",
        location="europe-west4",
        service_account="",
        network="",
        encryption_spec_key_name="",
        labels={"team": "vision"},
    )
    outputs = {"parameters": {"gcp_resources": {"outputFile": str(tmp_path / "gcp_resources")}}}
    system = {"vertex-ai-pipelines-run-billing-id": "1234", "team": "system-value"}
    return start(
        container,
        tmp_path,
        "vertex",
        parameters,
        outputs,
        env={"VERTEX_AI_PIPELINES_RUN_LABELS": json.dumps(system)},
    )


def test_every_lightweight_component_execs_python() -> None:
    from pipelines.targets.kubeflow.steps.tune import tune_on_katib
    from pipelines.targets.vertex.steps.tune import tune_on_vertex

    for op in (tune_on_vertex, tune_on_katib):
        command = list(op.component_spec.implementation.container.command)
        assert command[2].count(base.EXEC_START) == 1
        assert command[2].rstrip().splitlines()[-1].startswith(base.EXEC_START)
        base.exec_python(op)
        assert op.component_spec.implementation.container.command == command  # idempotent
    with pytest.raises(ValueError, match="not kfp's lightweight command"):
        container = SimpleNamespace(command=["python3", "-m", "some.launcher"])
        base.exec_python(
            SimpleNamespace(
                name="x",
                component_spec=SimpleNamespace(implementation=SimpleNamespace(container=container)),
            )
        )


@pytest.mark.parametrize("target", ["vertex", "kubeflow", "local"])
def test_every_compiled_step_signals_python_directly(tmp_path: Path, target: str) -> None:
    """Ours exec Python; GCPC's (the custom job, the model upload) start `python3 -u -m`."""
    path = compile_pipeline(target, for_target(target), tmp_path / f"{target}.yaml")
    executors = yaml.safe_load(Path(path).read_text())["deploymentSpec"]["executors"]
    starts = {}
    for name, executor in executors.items():
        if "container" not in executor:
            continue  # the importer: no container of ours
        command = executor["container"]["command"]
        if command[:2] == ["sh", "-ec"]:
            last = command[2].rstrip().splitlines()[-1]
            starts[name] = "exec" if last.startswith(base.EXEC_START) else last
        else:
            starts[name] = " ".join(command[:3])
    assert set(starts.values()) <= {"exec", "python3 -u -m"}, starts
    if target == "vertex":
        assert starts["exec-custom-training-job"] == "python3 -u -m"
        assert starts["exec-tune-on-vertex"] == "exec"


def test_cancelling_the_vertex_tune_step_cancels_the_hpt_job(tmp_path: Path) -> None:
    container = compiled_executor(tmp_path, "vertex", "exec-tune-on-vertex")
    proc, record = vertex_tune(tmp_path, container)
    assert wait_until_waiting(proc, record) == proc.pid  # sh handed over to Python
    code, out = cancel(proc)
    name = "projects/my-project/locations/europe-west4/hyperparameterTuningJobs/42"
    assert calls(record, "post") == [
        {
            "url": f"https://europe-west4-aiplatform.googleapis.com/v1/{name}:cancel",
            "authorization": "Bearer fake",
        }
    ], out
    assert code == 0  # GCPC's ExecutionContext exits 0 once the cancel is sent
    (created,) = calls(record, "create")
    # The run's labels reach the job; the system labels Vertex passes the step are kept.
    assert created["job"]["labels"] == {
        "team": "vision",
        "vertex-ai-pipelines-run-billing-id": "1234",
    }


def test_without_exec_the_signal_stops_at_the_shell_and_the_job_runs_on(tmp_path: Path) -> None:
    """The command kfp writes, as it was: dash dies, Python is orphaned, nothing is cancelled."""
    container = compiled_executor(tmp_path, "vertex", "exec-tune-on-vertex")
    command = list(container["command"])
    command[2] = command[2].replace(base.EXEC_START, base.KFP_START)
    proc, record = vertex_tune(tmp_path, {**container, "command": command})
    python = wait_until_waiting(proc, record)
    assert python != proc.pid
    try:
        cancel(proc)
        time.sleep(2.0)
        assert calls(record, "post") == []
        os.kill(python, 0)  # still running: the HPT job would keep billing
    finally:
        try:
            os.kill(python, signal.SIGKILL)
        except ProcessLookupError:
            pass


KUBEFLOW_STEPS = {
    "exec-tune-on-katib": (
        dict(
            namespace="team-a",
            display_name="hpt-pipeline-study",
            experiment_name="",
            service_account="",
            data_pvc="",
            data_mount_path="/mnt/hpt",
            cpu="2",
            memory="8Gi",
            timeout_s=3600,
        ),
        "trials",
        "experiments",
        "v1beta1",
    ),
    "exec-train-with-tfjob": (
        dict(
            display_name="hpt-pipeline-final",
            namespace="team-a",
            service_account="",
            data_pvc="hpt-data",  # --data and the export are on it (the run-time check)
            data_mount_path="/mnt/hpt",
            cpu="2",
            memory="8Gi",
            timeout_s=3600,
        ),
        "model",
        "tfjobs",
        "v1",
    ),
}


@pytest.mark.parametrize("executor", sorted(KUBEFLOW_STEPS))
def test_cancelling_a_kubeflow_step_deletes_its_object(tmp_path: Path, executor: str) -> None:
    extra, artifact, plural, version = KUBEFLOW_STEPS[executor]
    values = study_values()
    if plural == "tfjobs":
        values = dict(
            worker_pool_specs=worker_pools.training_worker_pool_specs(
                image_uri="registry.example/hpt/trainer:v1",
                command=["python", "-m", "trainer.task"],
                args=["--data=/mnt/hpt/data"],
                machine_type="n1-standard-8",
                worker_count=2,
            ),
            base_output_directory="/mnt/hpt/runs/r1/final",
        )
    container = compiled_executor(tmp_path, "kubeflow", executor)
    outputs: dict[str, Any] = {
        "artifacts": {
            artifact: {
                "artifacts": [
                    {
                        "name": artifact,
                        "type": {"schemaTitle": "system.Artifact"},
                        "uri": str(tmp_path / artifact),
                    }
                ]
            }
        }
    }
    if plural == "tfjobs":
        outputs["artifacts"][artifact]["artifacts"][0]["type"] = {"schemaTitle": "system.Model"}
        outputs["parameters"] = {"Output": {"outputFile": str(tmp_path / "Output")}}
    proc, record = start(container, tmp_path, "kubeflow", {**values, **extra}, outputs)
    assert wait_until_waiting(proc, record) == proc.pid
    code, out = cancel(proc)
    (created,) = calls(record, "create")
    name = created["body"]["metadata"]["name"]
    assert created["where"] == ["kubeflow.org", version, "team-a", plural]
    assert calls(record, "delete") == [
        {
            "where": ["kubeflow.org", version, "team-a", plural, name],
            "propagation_policy": "Background",
        }
    ], out
    assert f"Cancelled: {plural} team-a/{name} deleted" in out
    assert code == 128 + signal.SIGTERM  # the step fails: it did not finish its work


class DeletingApi:
    def __init__(self, status: int = 0) -> None:
        self.status = status
        self.deleted: list[tuple] = []

    def delete_namespaced_custom_object(self, *where: str, **options: Any) -> None:
        from kubernetes.client import ApiException

        self.deleted.append((*where, options))
        if self.status:
            raise ApiException(status=self.status, reason="Not Found")


@pytest.mark.parametrize("status", [0, 404])
def test_sigterm_deletes_the_object_once_and_exits_143(status: int) -> None:
    from pipelines.targets.kubeflow import kube

    api, lines = DeletingApi(status), []
    where = dict(group="kubeflow.org", version="v1", plural="tfjobs")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        with kube.deleted_on_sigterm(api, **where, namespace="ns", name="job", echo=lines.append):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
    assert stopped.value.code == kube.CANCELLED_EXIT == 143
    assert api.deleted == [
        ("kubeflow.org", "v1", "ns", "tfjobs", "job", {"propagation_policy": "Background"})
    ]
    assert lines == ([] if status == 404 else ["Cancelled: tfjobs ns/job deleted"])  # gone already
    assert signal.getsignal(signal.SIGTERM) == before  # restored on the way out


def test_a_finished_wait_leaves_sigterm_as_it_was() -> None:
    from pipelines.targets.kubeflow import kube

    before = signal.getsignal(signal.SIGTERM)
    where = dict(group="g", version="v", plural="p", namespace="n", name="x")
    with kube.deleted_on_sigterm(DeletingApi(), **where):
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before
