"""Compiled pipeline specs: golden files, strict proto parse, how payloads flow between tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipelines.compiler import compile_pipeline
from pipelines.jobs import trainer_args
from pipelines.pipeline import build_pipeline
from pipelines.settings import SECTION_OF, Settings
from pipelines.settings_space import study_space
from tests.support import normalize_spec
from trainer.contract import FIXED_TRAINER_SETTINGS

GOLDEN = Path(__file__).parent / "golden"
SECRET_MARKERS = (
    "private_key",
    "BEGIN PRIVATE KEY",
    "access_token",
    "refresh_token",
    "ya29.",
    "client_secret",
    "AIza",
)


def for_target(target: str, settings: Settings | None = None) -> Settings:
    """`settings` in a Kubeflow profile namespace for `kubeflow` (compile refuses `kubeflow`)."""
    settings = settings or Settings()
    if target == "kubeflow" and settings.kubeflow.kubeflow_namespace == "kubeflow":
        return settings.replace(kubeflow_namespace="team-a")
    return settings


def compiled(tmp_path: Path, target: str, settings: Settings | None = None) -> dict:
    """The compiled spec; a kfp-kubernetes platform spec (second document) under `platforms`."""
    path = compile_pipeline(target, for_target(target, settings), tmp_path / f"{target}.yaml")
    spec, *platform = yaml.safe_load_all(Path(path).read_text())
    for doc in platform:
        spec.update(doc or {})
    return spec


# Golden cases beyond each target's defaults: name -> (target, settings).
GOLDEN_CASES = {
    "local": ("local", Settings()),
    "vertex": ("vertex", Settings()),
    "kubeflow": ("kubeflow", Settings()),
    # tracking: vertex, time series through a TensorBoard: the fetch step's experiment inputs
    "vertex_tracking": (
        "vertex",
        Settings(
            tracking="vertex",
            tensorboard="projects/p/locations/us-central1/tensorboards/1",
            service_account="trainer@p.iam.gserviceaccount.com",
        ),
    ),
}


@pytest.mark.parametrize("case", list(GOLDEN_CASES))
def test_golden_spec(tmp_path, case):
    """`make golden` (UPDATE_GOLDEN=1) regenerates these after an intended change."""
    target, settings = GOLDEN_CASES[case]
    text = normalize_spec(
        Path(
            compile_pipeline(target, for_target(target, settings), tmp_path / "p.yaml")
        ).read_text()
    )
    golden = GOLDEN / f"pipeline_{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), "run `make golden` to create the golden specs"
    assert text == golden.read_text(), f"{golden.name} differs: run `make golden` if intended"


@pytest.mark.parametrize("target", ["local", "vertex", "kubeflow"])
def test_spec_parses_strictly_as_pipeline_spec(tmp_path, target):
    settings = Settings(data_pvc="hpt-data") if target == "kubeflow" else Settings()
    spec = compiled(tmp_path, target, settings)
    platforms = spec.pop("platforms", None)
    message = json_format.ParseDict(
        spec, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False
    )
    if target == "kubeflow":  # the PVC mounts: kfp-kubernetes' platform spec, strictly
        json_format.ParseDict(
            {"platforms": platforms}, pipeline_spec_pb2.PlatformSpec(), ignore_unknown_fields=False
        )
    assert message.pipeline_info.name == "hpt-pipeline"
    assert set(message.root.dag.tasks) >= {
        "prepare-dataset",
        "trial-job-spec",
        "select-best-trial",
        "final-job-spec",
        "evaluate-model",
    }


def test_vertex_study_payload_is_the_search_space(tmp_path):
    settings = Settings()
    spec = compiled(tmp_path, "vertex", settings)
    root_inputs = spec["root"]["inputDefinitions"]["parameters"]
    space = study_space(settings)
    assert root_inputs["study_spec_parameters"]["defaultValue"] == space.to_study_spec_parameters()
    # The metric is one parameter, the tag: the study's metric spec and goal follow from it.
    assert "study_spec_metrics" not in root_inputs and "goal" not in root_inputs
    assert root_inputs["metric_tag"]["defaultValue"] == "val_accuracy"
    hpt = spec["root"]["dag"]["tasks"]["tune-on-vertex"]
    params = hpt["inputs"]["parameters"]
    assert params["study_spec_metrics"]["taskOutputParameter"] == {
        "outputParameterKey": "study_spec_metrics",
        "producerTask": "study-metric",
    }
    # early_stopping reaches the HPT job (GCPC's op had no stopping spec to carry it).
    assert params["early_stopping"] == {"componentInputParameter": "early_stopping"}
    assert params["project"]["runtimeValue"]["constant"] == "{{$.pipeline_google_cloud_project_id}}"
    assert params["study_spec_parameters"] == {"componentInputParameter": "study_spec_parameters"}
    assert params["worker_pool_specs"]["taskOutputParameter"] == {
        "outputParameterKey": "worker_pool_specs",
        "producerTask": "trial-job-spec",
    }
    executor = spec["deploymentSpec"]["executors"][
        hpt["componentRef"]["name"].replace("comp-", "exec-")
    ]
    assert "def tune_on_vertex(" in " ".join(executor["container"]["command"])
    ids = [p["parameter_id"] for p in root_inputs["study_spec_parameters"]["defaultValue"]]
    assert ids == ["learning_rate", "momentum", "num_units"]


def test_vertex_best_parameters_flow_into_the_final_multi_worker_job(tmp_path):
    spec = compiled(tmp_path, "vertex")
    tasks = spec["root"]["dag"]["tasks"]
    final_spec = tasks["final-job-spec"]["inputs"]["parameters"]
    assert final_spec["best_parameters"]["taskOutputParameter"] == {
        "outputParameterKey": "best_parameters",
        "producerTask": "select-best-trial",
    }
    job = tasks["custom-training-job"]["inputs"]["parameters"]
    assert job["worker_pool_specs"]["taskOutputParameter"]["producerTask"] == "final-job-spec"
    assert job["restart_job_on_worker_restart"]["runtimeValue"]["constant"] is True
    # The component builds pool 0 (chief) and pool 1 (workers) with the best parameters as flags.
    from components.job_specs import final_job_spec

    dataset = SimpleNamespace(uri="gs://bucket/root/prepare-dataset/dataset", path="/gcs/x")
    job_dir = SimpleNamespace(
        uri="gs://bucket/root/final-job-spec/job_dir", path="/gcs/y", metadata={}
    )
    pools, base = final_job_spec.python_func(
        dataset=dataset,
        best_parameters={"learning_rate": 0.05, "momentum": 0.5, "num_units": 128.0},
        trainer_image="img:1",
        model="resnet50",
        weights="gs://bucket/weights/resnet50.weights.h5",
        epochs=3,
        batch_size=16,
        metric_tag="val_accuracy",
        precision="mixed_bfloat16",
        seed=7,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
        worker_count=3,
        shared_root="",
        job_dir=job_dir,
    )
    assert base == "gs://bucket/root/final-job-spec/job_dir"
    assert [p["replica_count"] for p in pools] == [1, 3]
    for pool in pools:
        args = pool["container_spec"]["args"]
        assert "--data=gs://bucket/root/prepare-dataset/dataset" in args
        assert {"--learning_rate=0.05", "--momentum=0.5", "--num_units=128"} <= set(args)
        assert "--precision=mixed_bfloat16" in args
        assert "--seed=7" in args  # the settings' seed reaches every replica
        assert "--model=resnet50" in args  # so do the model and its weights
        assert "--weights=gs://bucket/weights/resnet50.weights.h5" in args
        assert pool["container_spec"]["command"] == ["python", "-m", "trainer.task"]


@pytest.mark.parametrize("study_dir", ["", "/runs/latest/study"])
def test_trial_job_spec_is_one_replica_running_the_trainer(study_dir):
    from components.job_specs import trial_job_spec

    dataset = SimpleNamespace(
        uri="/root/prepare-dataset/dataset", path="/root/prepare-dataset/dataset"
    )
    study = SimpleNamespace(uri="/root/trial-job-spec/study", path="/root/trial-job-spec/study")
    pools, base = trial_job_spec.python_func(
        dataset=dataset,
        trainer_image="img:1",
        model="cnn",
        weights="none",
        epochs=2,
        batch_size=8,
        metric_tag="val_loss",
        precision="float32",
        seed=3,
        machine_type="n1-standard-4",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2.0,
        worker_count=0,
        study_dir=study_dir,
        shared_root="",
        study_spec_parameters=[],
        study=study,
    )
    assert base == (study_dir or "/root/trial-job-spec/study")
    assert "--seed=3" in pools[0]["container_spec"]["args"]
    assert len(pools) == 1 and pools[0]["replica_count"] == 1
    assert pools[0]["machine_spec"] == {
        "machine_type": "n1-standard-4",
        "accelerator_type": "NVIDIA_TESLA_T4",
        "accelerator_count": 2,
    }
    assert pools[0]["container_spec"]["args"] == [
        "--data=/root/prepare-dataset/dataset",
        "--model=cnn",
        "--weights=none",
        "--epochs=2",
        "--batch_size=8",
        "--metric_tag=val_loss",
        "--precision=float32",
        "--seed=3",
    ]


@pytest.mark.parametrize("target", ["local", "vertex", "kubeflow"])
def test_every_fixed_trainer_setting_flows_from_its_parameter_into_both_job_specs(tmp_path, target):
    """The contract's list is the one the settings, the parameters and both steps follow."""
    settings = Settings(data_pvc="hpt-data") if target == "kubeflow" else Settings()
    spec = compiled(tmp_path, target, settings)
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    tasks = spec["root"]["dag"]["tasks"]
    fields = set(SECTION_OF)
    assert len(FIXED_TRAINER_SETTINGS) >= 7
    for name in FIXED_TRAINER_SETTINGS:
        assert name in fields and name in parameters, name  # `--param epochs=5` still works
        for task in ("trial-job-spec", "final-job-spec"):
            wired = tasks[task]["inputs"]["parameters"][name]
            assert wired == {"componentInputParameter": name}, (task, name)


def test_trainer_flags_follow_the_contracts_list_and_cast_its_integers():
    fixed = {"model": "cnn", "weights": "none", "epochs": 5.0, "batch_size": "8"}
    fixed |= {"metric_tag": "val_loss", "precision": "float32", "seed": 3.0}
    flags = trainer_args.trainer_flags("/d", fixed)
    assert flags == [
        "--data=/d",
        "--model=cnn",
        "--weights=none",
        "--epochs=5",  # kfp.local hands numbers inside dicts as floats
        "--batch_size=8",
        "--metric_tag=val_loss",
        "--precision=float32",
        "--seed=3",
    ]
    assert [f.split("=")[0][2:] for f in flags[1:]] == list(FIXED_TRAINER_SETTINGS)
    with pytest.raises(ValueError, match="missing: seed"):
        trainer_args.trainer_flags("/d", {k: v for k, v in fixed.items() if k != "seed"})
    with pytest.raises(ValueError, match="not fixed trainer settings: learning_rate"):
        trainer_args.trainer_flags("/d", {**fixed, "learning_rate": 0.1})


def test_a_vertex_tensorboard_reaches_every_trial_and_the_final_job(tmp_path):
    """`tensorboard` (with its required service account): the HPT job's trial spec and the
    final CustomJob name it, so Vertex sets AIP_TENSORBOARD_LOG_DIR, which the trainer writes."""
    from pipelines.targets.vertex import hpt_job
    from tests.test_vertex_hpt_job import payload

    board = "projects/p/locations/us-central1/tensorboards/123"
    account = "hpt@my-project.iam.gserviceaccount.com"
    spec = compiled(tmp_path, "vertex", Settings(tensorboard=board, service_account=account))
    assert spec["root"]["inputDefinitions"]["parameters"]["tensorboard"]["defaultValue"] == board
    tasks = spec["root"]["dag"]["tasks"]
    for task in ("tune-on-vertex", "custom-training-job"):
        given = tasks[task]["inputs"]["parameters"]["tensorboard"]
        assert given == {"componentInputParameter": "tensorboard"}, task
    request = hpt_job.launcher_request(payload(tensorboard=board, service_account=account))
    assert request.trial_job_spec.tensorboard == board
    assert not hpt_job.launcher_request(payload()).trial_job_spec.tensorboard  # unset: none


def _all_tasks(spec: dict) -> dict:
    """Every task of the spec, sub-DAGs included, by task name."""
    tasks = dict(spec["root"]["dag"]["tasks"])
    for component in spec["components"].values():
        tasks.update(component.get("dag", {}).get("tasks", {}))
    return tasks


def test_vertex_registration_uploads_a_new_version_with_its_evaluation(tmp_path):
    settings = Settings(serving_image="us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest")
    spec = compiled(tmp_path, "vertex", settings)
    tasks = _all_tasks(spec)
    importer = spec["deploymentSpec"]["executors"]["exec-importer"]["importer"]
    assert importer["typeSchema"]["schemaTitle"] == "google.UnmanagedContainerModel"
    assert importer["metadata"]["containerSpec"]["imageUri"] == settings.images.serving_image
    # A later run uploads a version of the model found by name; the first run creates it.
    uploads = {n: t for n, t in tasks.items() if n.startswith("model-upload")}
    assert len(uploads) == 2
    with_parent = [
        t for t in uploads.values() if "parent_model" in t["inputs"].get("artifacts", {})
    ]
    assert len(with_parent) == 1
    assert with_parent[0]["inputs"]["artifacts"]["parent_model"]["componentInputArtifact"] == (
        "pipelinechannel--find-parent-model-model"
    )
    for task in uploads.values():
        assert task["inputs"]["artifacts"]["unmanaged_container_model"]["componentInputArtifact"]
    attach = tasks["model-evaluation-import"]["inputs"]
    assert attach["parameters"]["problem_type"]["runtimeValue"]["constant"] == "classification"
    assert attach["artifacts"]["metrics"]["componentInputArtifact"].endswith(
        "evaluate-model-metrics"
    )
    gate = spec["root"]["dag"]["tasks"]["condition-1"]["triggerPolicy"]["condition"]
    assert "evaluate-model-Output" in gate


def test_parent_model_lookup_asks_vertex_for_the_newest_model_by_name(monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1.services.model_service import ModelServiceClient
    from google.cloud.aiplatform_v1.types import Model

    from pipelines.targets.vertex import models as vertex_models

    requests = []

    def fake_list_models(self, request=None, **kwargs):
        requests.append(request)
        return [Model(name="projects/p/locations/europe-west4/models/7", display_name="hpt-cnn")]

    monkeypatch.setattr(ModelServiceClient, "list_models", fake_list_models)
    name = vertex_models.latest_model(
        "hpt-cnn", "europe-west4", project="p", credentials=AnonymousCredentials()
    )
    assert name == "projects/p/locations/europe-west4/models/7"
    request = requests[0]
    assert request["parent"] == "projects/p/locations/europe-west4"
    assert request["filter"] == 'display_name="hpt-cnn"'
    assert request["order_by"] == "create_time desc"
    assert vertex_models.model_uri(name, "europe-west4") == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4/models/7"
    )


def test_image_uris_flow_into_the_compiled_spec(tmp_path):
    settings = Settings(
        trainer_image="europe-docker.pkg.dev/p/r/trainer:abc",
        components_image="europe-docker.pkg.dev/p/r/components:abc",
    )
    spec = compiled(tmp_path, "vertex", settings)
    root = spec["root"]["inputDefinitions"]["parameters"]
    assert root["trainer_image"]["defaultValue"] == settings.images.trainer_image
    ours = [
        e
        for name, e in spec["deploymentSpec"]["executors"].items()
        if name in ("exec-prepare-dataset", "exec-select-best-trial", "exec-evaluate-model")
    ]
    assert ours and all(e["container"]["image"] == settings.images.components_image for e in ours)


def test_local_target_binds_the_local_executors(tmp_path):
    spec = compiled(tmp_path, "local")
    tasks = spec["root"]["dag"]["tasks"]
    assert {"tune-locally", "train-locally"} <= set(tasks)
    assert "hyperparameter-tuning-job" not in tasks and "custom-training-job" not in tasks
    assert "register-locally" in spec["components"]["comp-condition-1"]["dag"]["tasks"]


def test_compiled_specs_hold_no_credentials(tmp_path):
    settings = Settings(
        service_account="trainer@my-project.iam.gserviceaccount.com",
        kms_key="projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
    )
    for target in ("local", "vertex", "kubeflow"):
        made = compile_pipeline(target, for_target(target, settings), tmp_path / f"{target}.yaml")
        text = Path(made).read_text()
        assert not [m for m in SECRET_MARKERS if m in text]
        if target == "vertex":  # passed through as given, never anything more
            assert settings.cloud.service_account in text and settings.cloud.kms_key in text


def test_compiling_never_imports_tensorflow(tmp_path):
    code = (
        "import sys\n"
        "from pipelines.compiler import compile_pipeline\n"
        "from pipelines.settings import Settings\n"
        f"compile_pipeline('vertex', Settings(), {str(tmp_path / 'v.yaml')!r})\n"
        "from pipelines.app import cli\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]\n"
        "print(json.dumps(sorted(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="target='sagemaker'"):
        build_pipeline("sagemaker", Settings())


# Tasks that read or change state outside the run: a cached result would replay an old
# answer (Vertex caches a task whose inputs are unchanged, e.g. the registry lookup's
# constant display name). Keyed by component name in the compiled spec.
READS_OUTSIDE_STATE = {
    "local": {
        "comp-prepare-dataset",
        "comp-features-locally",
        "comp-tune-locally",
        "comp-train-locally",
        "comp-register-locally",
    },
    "vertex": {
        "comp-prepare-dataset",
        "comp-features-on-vertex",
        "comp-tune-on-vertex",
        "comp-fetch-trials",
        "comp-custom-training-job",
        "comp-find-parent-model",
        "comp-model-upload",
        "comp-model-upload-2",
        "comp-model-evaluation-import",
    },
    "kubeflow": {
        "comp-prepare-dataset",
        "comp-features-on-kubeflow",
        "comp-tune-on-katib",
        "comp-train-with-tfjob",
        "comp-register-on-kubeflow",
    },
}


def cached_tasks(spec: dict) -> dict[str, bool]:
    """Every executable task's component → whether Vertex may cache it (sub-DAGs walked)."""
    found: dict[str, bool] = {}
    components = spec["components"]

    def walk(dag: dict) -> None:
        for task in dag.get("tasks", {}).values():
            name = task["componentRef"]["name"]
            if "dag" in components[name]:
                walk(components[name]["dag"])
            else:
                found[name] = task.get("cachingOptions", {}).get("enableCache", False)

    walk(spec["root"]["dag"])
    return found


@pytest.mark.parametrize("target", ["local", "vertex", "kubeflow"])
def test_no_task_that_reads_outside_state_is_cached(target, tmp_path):
    spec = compiled(tmp_path, target)
    caching = cached_tasks(spec)
    assert READS_OUTSIDE_STATE[target] <= set(caching), sorted(caching)
    assert {name for name in READS_OUTSIDE_STATE[target] if caching[name]} == set()
    # What stays cacheable is pure: a function of its inputs only.
    assert {name for name, on in caching.items() if on} <= {
        "comp-trial-job-spec",
        "comp-features-job-spec",
        "comp-study-metric",
        "comp-final-job-spec",
        "comp-select-best-trial",
        "comp-evaluate-model",
        "comp-model-from-job",
        "comp-final-scheduling",  # the final_scheduling setting as Vertex's Scheduling
        "comp-importer",
    }


def test_kubeflow_spec_binds_katib_and_the_tfjob_to_the_same_payloads(tmp_path):
    spec = compiled(tmp_path, "kubeflow", Settings(kubeflow_namespace="team-a"))
    tasks = spec["root"]["dag"]["tasks"]
    tune = tasks["tune-on-katib"]["inputs"]["parameters"]
    assert tune["study_spec_parameters"] == {"componentInputParameter": "study_spec_parameters"}
    assert tune["worker_pool_specs"]["taskOutputParameter"]["producerTask"] == "trial-job-spec"
    assert tune["early_stopping"] == {"componentInputParameter": "early_stopping"}
    assert tune["namespace"]["runtimeValue"]["constant"] == "team-a"
    train = tasks["train-with-tfjob"]["inputs"]["parameters"]
    assert train["worker_pool_specs"]["taskOutputParameter"]["producerTask"] == "final-job-spec"
    assert "hyperparameter-tuning-job" not in tasks and "tune-on-vertex" not in tasks
    register = spec["components"]["comp-condition-1"]["dag"]["tasks"]["register-on-kubeflow"]
    assert register["inputs"]["artifacts"]["evaluation"]["componentInputArtifact"]


def test_kubeflow_mounts_the_data_pvc_on_every_step_that_touches_the_data(tmp_path):
    settings = Settings(data_pvc="hpt-data", data_mount_path="/mnt/hpt")
    spec = compiled(tmp_path, "kubeflow", settings)
    root = spec["root"]["inputDefinitions"]["parameters"]
    assert root["shared_root"]["defaultValue"] == "/mnt/hpt"
    k8s = spec["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    mounted = {
        name
        for name, config in k8s.items()
        if config.get("pvcMount")
        == [
            {
                "constant": "hpt-data",
                "mountPath": "/mnt/hpt",
                "pvcNameParameter": {"runtimeValue": {"constant": "hpt-data"}},
            }
        ]
        or any(m.get("mountPath") == "/mnt/hpt" for m in config.get("pvcMount", []))
    }
    assert {
        "exec-prepare-dataset",
        "exec-evaluate-model",
        "exec-train-with-tfjob",
        "exec-features-on-kubeflow",
    } <= mounted
    tune = spec["root"]["dag"]["tasks"]["tune-on-katib"]["inputs"]["parameters"]
    assert tune["data_pvc"]["runtimeValue"]["constant"] == "hpt-data"  # trial pods mount it


def test_a_data_pvc_is_refused_for_targets_that_cannot_mount_it(tmp_path):
    from pipelines.settings import SettingsError

    with pytest.raises(SettingsError, match="data_pvc=hpt-data: a PersistentVolumeClaim is for"):
        compiled(tmp_path, "vertex", Settings(data_pvc="hpt-data"))
