"""Run the compiled pipeline's steps and a Vertex trial from the built images (`make images-check`).

For each target's compiled spec (local, vertex, kubeflow), every lightweight component's
container command (`sh -ec ... python3 -m kfp.dsl.executor_main`, the component's source
embedded in the spec) runs inside the components image, with an executor input filled
with a real local run's step outputs (`tests.vertex_resolve`). The image runs as its own
filesystem and config (`buildah inspect`: USER, ENV, WORKDIR, ENTRYPOINT) through
`buildah run --isolation chroot`, not a container runtime (crun fails on setrlimit in
this sandbox). The checkout is not mounted: the component code comes from the spec, the
project code from the image; only the work folder (the local run's artifacts and each
step's outputs) is bound at the same path.

Outcomes: `ran to completion` (exit 0 and an executor output written) or `reached the API
call` (the failure is a missing-credentials/cluster error raised at the cloud client, after
imports and input parsing). Anything else (ImportError, TypeError, ...) fails the check.

    python -m tests.image_steps --buildah "buildah --root ..." \
        --components localhost/hpt/components:local --trainer localhost/hpt/trainer:local
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.vertex_resolve import _PLACEHOLDER, render

TARGETS = ("local", "vertex", "kubeflow")
# Cloud-only producers and the local task whose real outputs stand for theirs.
EQUIVALENT = {
    "fetch-trials": "tune-locally",
    "tune-on-katib": "tune-locally",
    "model-from-job": "train-locally",
    "train-with-tfjob": "train-locally",
}
# Where the failure shows the step reached its cloud client (after imports and input parsing).
API_MARKERS = (
    "DefaultCredentialsError",
    "Your default credentials were not found",
    "kubernetes.config.config_exception.ConfigException",
    "Invalid kube-config file",
    "Service host/port is not set",
    "Failed to establish a new connection",
    "Name or service not known",
    "Temporary failure in name resolution",
)
BAD_MARKERS = ("ModuleNotFoundError", "ImportError", "TypeError", "SyntaxError", "NameError")


class Image:
    """A built image run by chroot: its config read from `buildah inspect`."""

    def __init__(self, buildah: str, name: str):
        self.buildah = shlex.split(buildah)
        self.name = name
        info = json.loads(self._out("inspect", "--type", "image", name))
        config = info["OCIv1"]["config"]
        self.user = config.get("User") or "root"
        self.env = dict(e.split("=", 1) for e in config.get("Env", []))
        self.workdir = config.get("WorkingDir") or "/"
        self.entrypoint = config.get("Entrypoint") or []
        self.size = self._out("images", "--format", "{{.Size}}", name).strip()
        self.container = self._out("from", "--pull-never", name).strip()

    def _out(self, *args: str) -> str:
        return subprocess.run(
            [*self.buildah, *args], check=True, capture_output=True, text=True
        ).stdout

    def run(
        self, argv: list[str], binds: list[str], env: Mapping[str, str] | None = None, timeout=900
    ) -> subprocess.CompletedProcess:
        """`argv` in the image, as its USER, in its WORKDIR, with its ENV (+ `env`)."""
        cmd = [*self.buildah, "run", "--isolation", "chroot", "--user", self.user]
        cmd += ["--workingdir", self.workdir]
        for key, value in (env or {}).items():
            cmd += ["--env", f"{key}={value}"]
        for bind in binds:
            cmd += ["-v", f"{bind}:{bind}"]
        return subprocess.run(
            [*cmd, self.container, "--", *argv], capture_output=True, text=True, timeout=timeout
        )

    def remove(self) -> None:
        subprocess.run([*self.buildah, "rm", self.container], capture_output=True)


def local_outputs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each local task's executor output (parameterValues, artifacts), by task name."""
    return {
        p.parent.name: json.loads(p.read_text())
        for p in sorted(run_dir.glob("*/executor_output.json"))
    }


def produced(run_dir: Path, model: str) -> dict[str, dict[str, Any]]:
    """The real run's outputs, and the equivalents standing for the cloud-only producers."""
    out = local_outputs(run_dir)
    for task, local_task in EQUIVALENT.items():
        out[task] = out[local_task]
    api = "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-project/locations/europe-west4"
    for task, kind, collection in (
        ("tune-on-vertex", "HyperparameterTuningJob", "hyperparameterTuningJobs"),
        ("custom-training-job", "CustomJob", "customJobs"),
    ):  # what GCPC's launchers write into gcp_resources
        resource = {"resources": [{"resourceType": kind, "resourceUri": f"{api}/{collection}/1"}]}
        out[task] = {"parameterValues": {"gcp_resources": json.dumps(resource)}}
    out["find-parent-model"] = {"parameterValues": {"Output": False}}
    return out


def resolve(spec: Mapping[str, Any], outputs: Mapping[str, Any], overrides: Mapping[str, Any]):
    """Each lightweight task's (component, parameter values, input artifacts), by task name."""
    components = spec["components"]
    root = spec["root"]["inputDefinitions"]["parameters"]
    scope0 = {k: p.get("defaultValue") for k, p in root.items()} | dict(overrides)
    tasks: dict[str, tuple[Mapping[str, Any], dict[str, Any], dict[str, Any]]] = {}

    def walk(dag: Mapping[str, Any], params: Mapping[str, Any], artifacts: Mapping[str, Any]):
        for name, task in dag.get("tasks", {}).items():
            comp = components[task["componentRef"]["name"]]
            values = {
                k: p["defaultValue"]
                for k, p in comp.get("inputDefinitions", {}).get("parameters", {}).items()
                if "defaultValue" in p
            }
            for k, b in task.get("inputs", {}).get("parameters", {}).items():
                if "runtimeValue" in b:
                    values[k] = b["runtimeValue"]["constant"]
                elif "componentInputParameter" in b:
                    values[k] = params.get(b["componentInputParameter"])
                elif "taskOutputParameter" in b:
                    ref = b["taskOutputParameter"]
                    values[k] = (
                        outputs.get(ref["producerTask"], {})
                        .get("parameterValues", {})
                        .get(ref["outputParameterKey"])
                    )
            arts = {}
            for k, b in task.get("inputs", {}).get("artifacts", {}).items():
                if "componentInputArtifact" in b:
                    arts[k] = artifacts.get(b["componentInputArtifact"])
                elif "taskOutputArtifact" in b:
                    ref = b["taskOutputArtifact"]
                    found = outputs.get(ref["producerTask"], {}).get("artifacts", {})
                    arts[k] = found.get(ref["outputArtifactKey"])
            if "dag" in comp:
                walk(comp["dag"], values, arts)
            else:
                tasks[name] = (comp, values, arts)

    walk(spec["root"]["dag"], scope0, {})
    return tasks


def executor_input(comp, values, arts, out_dir: Path) -> dict[str, Any]:
    """The `{{$}}` a backend hands the component: inputs, and where its outputs go."""
    outs = comp.get("outputDefinitions", {})
    defs = comp.get("inputDefinitions", {}).get("artifacts", {})
    inputs_artifacts = {}
    for k, art in arts.items():
        if art is None:
            continue
        items = [
            {**a, "type": {"schemaTitle": defs[k]["artifactType"]["schemaTitle"]}}
            for a in art["artifacts"]
        ]
        inputs_artifacts[k] = {"artifacts": items}
    return {
        "inputs": {
            "parameterValues": {k: v for k, v in values.items() if v is not None},
            "artifacts": inputs_artifacts,
        },
        "outputs": {
            "parameters": {
                k: {"outputFile": str(out_dir / "parameters" / k)}
                for k in outs.get("parameters", {})
            },
            "artifacts": {
                k: {
                    "artifacts": [
                        {
                            "name": k,
                            "type": {"schemaTitle": d["artifactType"]["schemaTitle"]},
                            "uri": str(out_dir / "artifacts" / k),
                            "metadata": {},
                        }
                    ]
                }
                for k, d in outs.get("artifacts", {}).items()
            },
            "outputFile": str(out_dir / "executor_output.json"),
        },
    }


def container_argv(spec, comp, exec_input: Mapping[str, Any], values) -> list[str]:
    """The executor's command + args with `{{$}}` and parameter placeholders filled."""
    container = spec["deploymentSpec"]["executors"][comp["executorLabel"]]["container"]
    args = []
    for arg in container.get("args", []):
        if arg == "{{$}}":
            args.append(json.dumps(exec_input))
        else:
            args.append(_PLACEHOLDER.sub(lambda m: render(values.get(m[1], "")), arg))
    return [*container["command"], *args]


def outcome(proc: subprocess.CompletedProcess, out_dir: Path) -> str:
    """`ran to completion`, `reached the API call`, or `FAILED: <last line>`."""
    text = proc.stdout + proc.stderr
    if proc.returncode == 0 and (out_dir / "executor_output.json").exists():
        return "ran to completion"
    if proc.returncode == 0:
        return "ran to completion (no executor output)"
    reached = [m for m in API_MARKERS if m in text]
    if reached and not any(m in text for m in BAD_MARKERS):
        raised_lines = re.findall(r"^((?:\w+\.)+\w*(?:Error|Exception)):", text, re.M)
        raised = raised_lines[-1].rsplit(".", 1)[-1] if raised_lines else reached[0]
        return f"reached the API call ({raised})"
    raised = re.findall(r"^(\w[\w.]*(?:Error|Exception)\b.*)$", text, re.M)
    raised = [line for line in raised if not line.startswith("Error: exit status")]
    last = raised[-1:] or [line for line in text.splitlines() if line.strip()][-1:] or ["?"]
    return f"FAILED: {last[0][:160]}"


def run_steps(
    image: Image, work: Path, run_dir: Path, model: str, overrides, binds: list[str]
) -> list[dict]:
    """Every lightweight step of the three compiled specs, run in the components image."""
    from pipelines.compiler import compile_pipeline
    from pipelines.settings import LOCAL_RUN_DEFAULTS, load_settings

    # A profile namespace: compile refuses `kubeflow` for the kubeflow target.
    profile = {"kubeflow_namespace": "team-a"}
    settings = load_settings(defaults=LOCAL_RUN_DEFAULTS, overrides=profile, environ={})
    rows = []
    outputs = produced(run_dir, model)
    for target in TARGETS:
        spec_path = compile_pipeline(target, settings, work / f"{target}.yaml")
        spec = yaml.safe_load(Path(spec_path).read_text())
        for task, (comp, values, arts) in sorted(resolve(spec, outputs, overrides).items()):
            container = spec["deploymentSpec"]["executors"][comp["executorLabel"]].get("container")
            if not container or "executor_main" not in " ".join(container.get("command", [])):
                continue  # GCPC's own container ops and the importer: not our image
            out_dir = work / "steps" / target / task
            out_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(out_dir, 0o777)
            exec_in = executor_input(comp, values, arts, out_dir)
            started = time.perf_counter()
            proc = image.run(container_argv(spec, comp, exec_in, values), binds)
            seconds = time.perf_counter() - started
            (out_dir / "log.txt").write_text(proc.stdout + proc.stderr)
            rows.append(
                {
                    "target": target,
                    "step": task,
                    "outcome": outcome(proc, out_dir),
                    "seconds": round(seconds, 1),
                    "log": str(out_dir / "log.txt"),
                }  # fmt: skip
            )
            print(f"{target:9} {task:22} {rows[-1]['outcome']}  ({seconds:.0f} s)", flush=True)
    return rows


# What GCPC's launcher code (our tune-on-vertex and the GCPC ops' runners) imports at run time.
LAUNCHER_IMPORTS = (
    "google.auth",
    "google.cloud.aiplatform",
    "google.cloud.aiplatform_v1",
    "google_cloud_pipeline_components.container.v1.gcp_launcher.job_remote_runner",
    "google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job.remote_runner",
    "kfp.dsl.executor_main",
)
SIZES = (
    "import importlib.metadata as md, json, os\n"
    "rows = []\n"
    "for d in md.distributions():\n"
    "    size = sum(os.path.getsize(p.locate()) for p in d.files or () if p.locate().is_file())\n"
    "    rows.append((d.metadata['Name'], d.version, size))\n"
    "print(json.dumps(sorted(rows, key=lambda r: -r[2])))\n"
)


def dependencies(image: Image, imports: tuple[str, ...] = ()) -> dict[str, Any]:
    """The image's installed distributions with their sizes; `imports` imported as its USER."""
    proc = image.run(["python", "-c", SIZES], [])
    found = image.run(["python", "-c", "import importlib,sys; [importlib.import_module(m) "
                       "for m in sys.argv[1:]]; print('ok')", *imports], [])  # fmt: skip
    return {
        "distributions": json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr,
        "imports": "ok" if found.stdout.strip() == "ok" else found.stderr[-800:],
        "size": image.size,
    }


def run_trial(image: Image, work: Path, run_dir: Path, binds: list[str]) -> dict[str, Any]:
    """The trainer image's ENTRYPOINT as a Vertex HPT trial: flags appended, Vertex's env."""
    spec = local_outputs(run_dir)["trial-job-spec"]["parameterValues"]["worker_pool_specs"]
    pool = json.loads(spec) if isinstance(spec, str) else spec
    args = [a for a in pool[0]["container_spec"].get("args", [])]
    trial_dir = work / "trial"
    trial_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(trial_dir, 0o777)
    args = ["--epochs=1" if a.startswith("--epochs=") else a for a in args]  # a short trial
    params = ["--learning_rate=0.01", "--momentum=0.8", "--num_units=64"]
    env = {
        "CLOUD_ML_TRIAL_ID": "7",
        "CLOUD_ML_JOB_ID": "hpt-check",
        "CLOUD_ML_PROJECT_ID": "my-project",
        "AIP_MODEL_DIR": f"{trial_dir}/7/model/",
        "AIP_CHECKPOINT_DIR": f"{trial_dir}/7/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{trial_dir}/7/logs/",
        "CLUSTER_SPEC": json.dumps(
            {
                "cluster": {"workerpool0": ["localhost:2222"]},
                "task": {"type": "workerpool0", "index": 0, "trial": "7"},
            }
        ),  # fmt: skip
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    argv = [*image.entrypoint, *args, *params]
    started = time.perf_counter()
    proc = image.run(argv, binds, env)
    seconds = time.perf_counter() - started
    (trial_dir / "log.txt").write_text(proc.stdout + proc.stderr)
    metric_file = image.env.get("CLOUD_ML_HP_METRIC_FILE", "/tmp/hypertune/output.metrics")
    metrics = image.run(["sh", "-c", f"id -un; ls -ln {metric_file}; cat {metric_file}"], [])
    exported = sorted(p.name for p in (trial_dir / "7" / "model").glob("*"))
    return {
        "argv": argv,
        "user": image.user,
        "rc": proc.returncode,
        "seconds": round(seconds, 1),
        "metric_file": metrics.stdout.strip(),
        "exported": exported,
        "log": str(trial_dir / "log.txt"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the checks; print a table; exit 1 when a step or the trial did not pass."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buildah", default="buildah")
    parser.add_argument("--components", default="localhost/hpt/components:local")
    parser.add_argument("--trainer", default="localhost/hpt/trainer:local")
    parser.add_argument("--work", default="/var/tmp/hpt-images/check")
    parser.add_argument("--run-dir", help="an existing local run's folder (else one is made)")
    parser.add_argument("--skip-trainer", action="store_true")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o777)
    if args.run_dir:
        run_dir = Path(args.run_dir)
    else:  # a small real local run, outside the checkout, as the steps' inputs
        cmd = [str(Path(sys.executable).parent / "hpt-pipeline"), "run", "--max-trials", "2",
               "--parallel-trials", "1", "--epochs", "2", "--output", str(work / "run"),
               "--registry", str(work / "registry")]  # fmt: skip
        subprocess.run(cmd, check=True)
        runs = sorted((work / "run" / "artifacts").iterdir(), key=lambda p: p.stat().st_mtime)
        run_dir = runs[-1]
    output = run_dir.parent.parent  # <output>/artifacts/<run>
    binds = sorted({str(work), str(output)})  # bound at the same path; the checkout is not
    for path in (work, output, *work.rglob("*"), *output.rglob("*")):
        if path.is_symlink():
            continue
        # the image's USER (uid 1000 in the components image) reads the run, writes outputs
        os.chmod(path, 0o777 if path.is_dir() else path.stat().st_mode | 0o666)
    model = local_outputs(run_dir)["train-locally"]["artifacts"]["model"]["artifacts"][0]["uri"]
    overrides = {
        "study_dir": str(work / "study-steps"),  # a fresh study: tune-locally runs its trials
        "registry_dir": str(work / "registry-steps"),
        "location": "europe-west4",
    }
    report: dict[str, Any] = {}
    components = Image(args.buildah, args.components)
    try:
        report["components_dependencies"] = dependencies(components, LAUNCHER_IMPORTS)
        report["steps"] = run_steps(components, work, run_dir, model, overrides, binds)
    finally:
        components.remove()
    if not args.skip_trainer:
        trainer = Image(args.buildah, args.trainer)
        try:
            report["trainer_dependencies"] = dependencies(trainer, ("hypertune", "tensorflow"))
            report["trial"] = run_trial(trainer, work, run_dir, binds)
        finally:
            trainer.remove()
        print(json.dumps(report["trial"], indent=1))
    (work / "report.json").write_text(json.dumps(report, indent=1))
    bad = [r for r in report["steps"] if r["outcome"].startswith("FAILED")]
    for r in report["steps"]:
        print(f"| {r['target']} | {r['step']} | {r['outcome']} | {r['seconds']} s |")
    trial = report.get("trial")
    trial_ok = trial is None or (trial["rc"] == 0 and "val_accuracy" in trial["metric_file"])
    return 1 if bad or not trial_ok else 0


if __name__ == "__main__":
    sys.exit(main())
