"""The whole local pipeline, end to end on the bundled sample (small budget)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from pipelines.app.run_summary import summarize
from pipelines.jobs import fork_client
from pipelines.settings import LOCAL_RUN_DEFAULTS, load_settings
from pipelines.study import trials
from pipelines.targets.local import registry
from pipelines.targets.local.cli.run import LOG_FILE, is_tf_noise, run_local
from tests.support import ancestors
from trainer import contract

pytestmark = pytest.mark.slow
PROGRESS: list[str] = []  # what the first run of `two_runs` showed on the terminal
RERUN: list[str] = []  # and the second
DATASET_FILES: dict[str, tuple[int, int]] = {}  # the first run's dataset: inode, mtime per file
SECRET_MARKERS = ("private_key", "BEGIN PRIVATE KEY", "access_token", "refresh_token", "ya29.")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs into the same output: the second resumes the finished study and reuses its
    finished final job (issue 51: it retrained it, and registered one more version)."""
    root = tmp_path_factory.mktemp("e2e")
    settings = load_settings(
        defaults=LOCAL_RUN_DEFAULTS,
        overrides={
            "output": str(root / "run"),
            "registry": str(root / "registry"),
            "max_trials": 3,
            "parallel_trials": 2,
            "epochs": 3,
        },
        environ={},
    )
    PROGRESS.clear()
    private = root / "system-tmp"  # the runs' TMPDIR: must stay empty
    private.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for name in ("TMPDIR", "TEMP", "TMP"):
            mp.setenv(name, str(private))
        mp.setattr(tempfile, "tempdir", str(private))
        # TensorFlow's info lines on every host (at the run's default level 2, an AVX2 host
        # prints none), so that where they go is seen: the log, never the terminal.
        mp.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
        first = summarize(run_local(settings, echo=PROGRESS.append))
        DATASET_FILES.clear()
        DATASET_FILES.update(_files(root / "run" / "datasets"))
        RERUN.clear()
        second = summarize(run_local(settings, echo=RERUN.append))
    LEFT_IN_TMP[:] = sorted(p.name for p in private.iterdir())
    return settings, first, second


LEFT_IN_TMP: list[str] = []


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder`: its inode and modification time (a rewrite changes them)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_a_rerun_reuses_the_prepared_dataset_whole_and_says_where(two_runs):
    """Issue 52: each run's data step prepared the dataset again, into a folder of its own."""
    settings, _, _ = two_runs
    (dataset,) = (Path(settings.local.output) / "datasets").iterdir()
    shards = [name for name in DATASET_FILES if name.endswith(".tfrecord")]
    assert len(shards) == 24 and f"{dataset.name}/metadata.json" in DATASET_FILES
    assert _files(dataset.parent) == DATASET_FILES  # nothing written again
    said = f"reused the dataset prepared earlier at {dataset} (24 shards, the same plan)"
    assert said in [line.strip() for line in RERUN]
    card = registry.list_models(settings.local.registry)[0]
    assert card["lineage"]["dataset"] == str(dataset)  # the folder the trials read


def test_a_run_leaves_nothing_in_the_temporary_folder_or_its_output(two_runs):
    settings, _, _ = two_runs
    assert LEFT_IN_TMP == []
    assert not (Path(settings.local.output) / "tmp").exists()  # the run's own temporary folder
    assert not list(Path(settings.local.output, "study").glob("*/local/tmp"))  # the trials'


def test_the_first_trials_cover_every_num_units_value(two_runs):
    _, first, _ = two_runs
    units = [trials.trial_parameters(t)["num_units"] for t in trials.read_trials(first["trials"])]
    assert sorted(units) == [64, 128, 256]  # 3 trials, 3 values


def test_progress_holds_none_of_tensorflows_chatter_while_the_log_keeps_it(two_runs):
    settings, _, _ = two_runs
    # TensorFlow's import-time lines come from the process every TensorFlow step forks from.
    logs = "".join(
        (Path(settings.local.output) / name).read_text()
        for name in (LOG_FILE, fork_client.LOG_FILE)
    )
    assert "▶ tune-locally" in PROGRESS and "✓ train-locally success" in PROGRESS
    assert any("epoch" in line for line in PROGRESS)  # the tasks' own output still shows
    for marker in ("absl::InitializeLog", "I0000 "):
        assert marker in logs, marker  # TensorFlow did print it, into the run's log files
    for marker in ("oneDNN custom operations", "absl::InitializeLog", "I0000 "):
        assert not any(marker in line for line in PROGRESS), marker  # oneDNN's: some CPUs only
    assert not any(is_tf_noise(line) for line in PROGRESS)


def test_trials_artifact_holds_the_study(two_runs):
    settings, first, _ = two_runs
    all_trials = trials.read_trials(first["trials"])
    assert [t["id"] for t in all_trials] == ["1", "2", "3"]
    for trial in all_trials:
        trials.validate_trial(trial)  # strict parse into aiplatform_v1.Trial
        assert {p["parameterId"] for p in trial["parameters"]} == {
            "learning_rate",
            "momentum",
            "num_units",
        }
    succeeded = [t for t in all_trials if trials.trial_state(t) == trials.TrialState.SUCCEEDED]
    best = max(succeeded, key=lambda t: trials.final_metric(t, "val_accuracy"))
    assert first["best_metric"] == pytest.approx(trials.final_metric(best, "val_accuracy"))
    assert first["trial_states"] == {
        "SUCCEEDED": len(succeeded),
        **({"INFEASIBLE": 3 - len(succeeded)} if len(succeeded) < 3 else {}),
    }


def test_the_runs_mlflow_store_holds_the_study_its_trials_and_the_final_job(two_runs):
    """`mlflow` on the run folder's SQLite store: 1 study run, a nested run per trial whose
    val_accuracy history is the trials JSON's, 1 final-job run whose id the registry keeps."""
    from mlflow.tracking import MlflowClient

    settings, first, _ = two_runs
    uri = f"sqlite:///{Path(settings.local.output).resolve() / 'mlflow.db'}"
    assert first["mlflow"].startswith(f"mlflow ui --backend-store-uri {uri}")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(settings.cloud.display_name).experiment_id
    pipeline_run = first["trials"].rsplit("/", 2)[0]  # the first run's, not the resumed one's
    (study,) = client.search_runs(
        [experiment], f"tags.`hpt.kind` = 'study' and tags.`hpt.pipeline_run` = '{pipeline_run}'"
    )
    study_id = study.info.run_id
    nested = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{study_id}'")
    written = {t["id"]: t for t in trials.read_trials(first["trials"])}
    assert sorted(r.data.tags["hpt.trial_id"] for r in nested) == sorted(written)
    for run in nested:
        trial = written[run.data.tags["hpt.trial_id"]]
        history = sorted(
            (m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_accuracy")
        )
        assert history == sorted(
            (int(m["stepCount"]), trials.measurement_metrics(m)["val_accuracy"])
            for m in trial["measurements"]
        )
        assert run.data.params == {k: str(v) for k, v in trials.trial_parameters(trial).items()}
    (final,) = client.search_runs(
        [experiment], f"tags.`hpt.kind` = 'final' and tags.`hpt.study_run_id` = '{study_id}'"
    )
    card = json.loads((Path(first["registered"]) / registry.CARD).read_text())
    assert card["tracking"]["mlflow_run_id"] == final.info.run_id
    assert card["lineage"]["mlflow_run_id"] == final.info.run_id
    assert final.data.tags["hpt.model"] == card["lineage"]["model"]  # written before registering
    assert final.data.tags["hpt.passed_threshold"] == "true"
    # and the version registered from it (the register step's writer; lost once, issue 55)
    registered = Path(first["registered"])
    version = f"{registered.parent.name}/v{first['version']}"
    assert final.data.tags["hpt.registered_model"] == version
    assert final.data.tags["hpt.registry_path"] == str(registered)


def test_final_model_was_trained_with_the_best_parameters(two_runs):
    _, first, _ = two_runs
    card = json.loads((Path(first["model"]) / "model.json").read_text())
    for name, value in first["best_parameters"].items():
        assert card["hyperparameters"][name] == pytest.approx(value)
    assert card["training"]["strategy"] == "MultiWorkerMirroredStrategy"
    assert card["training"]["replicas"] == 2
    # The default precision travels as `auto` and is resolved by the machine that trains.
    assert card["training"]["precision_requested"] == "auto"
    assert card["training"]["precision"] in ("float32", "mixed_bfloat16")


def test_every_trainer_replica_was_forked_from_the_run_s_preloaded_trainer(two_runs):
    """`hpt-pipeline run` starts one fork server; no replica or step fell back to a fresh start."""
    from pipelines.jobs.replica_process import FORKED_NOTE

    settings, first, _ = two_runs
    logs = sorted(Path(settings.local.output, "study").glob("*/local/*-0.log"))
    logs += sorted((Path(first["model"]).parent / "local").glob("*-0.log"))
    assert len(logs) == 3 + 2  # three trials, the final job's chief and worker
    for log in logs:
        assert log.read_text().splitlines()[1].startswith(FORKED_NOTE), log
    assert (Path(settings.local.output) / "fork-server.log").is_file()
    # The preparation and evaluation steps' TensorFlow halves were forked from it too.
    run_log = (Path(settings.local.output) / LOG_FILE).read_text()
    for module in ("dataprep.prepare", "trainer.evaluate"):
        assert f"$ python -m {module} (forked)" in run_log, module


def test_evaluation_matches_an_independent_recomputation(two_runs):
    import tensorflow as tf

    from trainer import data, records

    _, first, _ = two_runs
    model_card = json.loads((Path(first["model"]) / "model.json").read_text())
    data_dir = model_card["dataset"]["path"]
    metadata = records.read_metadata(data_dir)
    serve = tf.saved_model.load(first["model"]).signatures["serving_default"]
    correct = total = 0
    for images, labels in data.read_split(data_dir, metadata, "test").batch(50):
        encoded = [tf.io.encode_png(img).numpy() for img in images]
        predicted = serve(image_bytes=tf.constant(encoded))["class_id"].numpy()
        correct += int(np.sum(predicted == labels.numpy()))
        total += len(encoded)
    assert total == metadata["splits"]["test"]["count"]
    assert first["test_metrics"]["test_accuracy"] == pytest.approx(correct / total)
    assert first["test_metrics"]["test_examples"] == total
    assert first["evaluation"] == f"{first['figures']}/index.html"  # opens as a page
    report = Path(first["evaluation"]).read_text()
    assert "<html>" in report and f"{correct / total:.4f}" in report
    from PIL import Image

    with Image.open(Path(first["figures"]) / "confusion_matrix.png") as png:
        assert png.format == "PNG" and png.size[0] > 100


def test_a_rerun_that_changes_nothing_reuses_the_final_job_and_registers_nothing_new(two_runs):
    """Issue 51 (11, 18): the rerun retrained the final job and registered an identical copy."""
    settings, first, second = two_runs
    assert (first["version"], second["version"]) == (1, 1)
    assert (first["reused"], second["reused"]) == (False, True)
    assert registry.versions(settings.local.registry, settings.cloud.model_display_name) == [1]
    assert second["model"] == first["model"]  # the same export: the job was not run again
    log = Path(second["log"]).read_text()
    assert log.count("final job: reused, it finished in an earlier run") == 1
    assert "the same model, already registered" in log


def test_the_registered_version_has_its_lineage(two_runs):
    settings, first, _ = two_runs
    card = registry.list_models(settings.local.registry)[0]
    dataset_meta = json.loads((Path(card["lineage"]["dataset"]) / "metadata.json").read_bytes())
    assert dataset_meta["source"] == "sample"
    from trainer.records import file_digest

    assert (
        card["lineage"]["dataset_metadata_sha256"]
        == file_digest(str(Path(card["lineage"]["dataset"]) / "metadata.json"))["sha256"]
    )
    assert card["lineage"]["best_trial_id"] == first["best_trial_id"]
    assert (Path(card["path"]) / "model" / "saved_model.pb").exists()


def test_rerun_resumes_the_study_instead_of_repeating_it(two_runs):
    _, first, second = two_runs
    again = trials.read_trials(second["trials"])
    assert [t["id"] for t in again] == ["1", "2", "3"]
    assert again == trials.read_trials(first["trials"])


def test_no_credentials_in_logs_or_artifacts(two_runs):
    settings, first, _ = two_runs
    files = [
        Path(first["log"]),
        *Path(first["run_dir"]).rglob("*.json"),
        *Path(first["run_dir"]).rglob("*.yaml"),
    ]
    for path in files:
        text = path.read_text(errors="replace")
        assert not [m for m in SECRET_MARKERS if m in text], path


def test_lineage_links_the_registered_model_to_the_dataset_checksum_and_best_trial(two_runs):
    from pipelines.lineage import local as local_lineage_lib

    _, first, _ = two_runs
    graph = local_lineage_lib.local_lineage(Path(first["run_dir"]))
    registered = graph.nodes["artifact:register-locally/registered"]
    upstream = ancestors(graph, registered.id)
    datasets = [graph.nodes[n] for n in upstream if graph.nodes[n].type == "system.Dataset"]
    model_card = json.loads((Path(first["model"]) / "model.json").read_text())
    assert [d.details["metadata_sha256"] for d in datasets] == [
        model_card["dataset"]["metadata_sha256"]
    ]
    assert sorted(n for n in upstream if graph.nodes[n].kind == "trial") == [
        f"trial:{first['best_trial_id']}"
    ]


def test_trial_report_on_a_real_run(two_runs, tmp_path):
    from PIL import Image

    from pipelines.reports import trial_report

    settings, first, _ = two_runs
    study = trial_report.load_trials(settings.local.output)
    report = trial_report.write_report(
        study, tmp_path, trial_report.Metric("val_accuracy", "maximize")
    )
    for path in report.figures.values():
        with Image.open(path) as png:
            assert png.format == "PNG"
    assert f"best: trial {first['best_trial_id']}" in report.page.read_text()


def test_a_model_below_the_evaluation_threshold_is_not_registered(two_runs):

    settings, _, second = two_runs
    # Untracked: this run checks the gate, `two_runs` the MLflow store (its writer, ~4 s).
    gated_settings = settings.replace(eval_threshold=1.01, tracking="off")
    gated = summarize(run_local(gated_settings, echo=lambda line: None))
    assert gated["passed"] is False and gated["registered"] is None
    assert registry.versions(settings.local.registry, settings.cloud.model_display_name) == [1]
    assert "model NOT registered" in Path(gated["log"]).read_text()


def test_the_compiled_vertex_spec_resolves_into_requests_gcpc_launchers_accept(
    two_runs, tmp_path, monkeypatch
):
    """The Vertex spec's launcher payloads, filled with this real run's step outputs.

    Placeholders are rendered as the backend substitutes them; the requests are then
    built by GCPC's own launcher code (HPT through our tune component's payload, the
    custom job and the model upload) with only the API calls replaced, and must parse
    into the aiplatform_v1 types carrying the search space, the chief and worker pools
    and the best parameters.
    """
    import yaml
    from google.cloud.aiplatform_v1.types import Model
    from google.protobuf import json_format
    from google_cloud_pipeline_components.container.v1.custom_job import (
        remote_runner as custom_job_runner,
    )
    from google_cloud_pipeline_components.container.v1.gcp_launcher import lro_remote_runner
    from google_cloud_pipeline_components.container.v1.model.upload_model import (
        remote_runner as upload_runner,
    )

    from pipelines.compiler import compile_pipeline
    from pipelines.lineage.local import task_outputs
    from pipelines.targets.vertex import hpt_job
    from pipelines.targets.vertex.steps.train_final import final_scheduling
    from tests.vertex_resolve import capture_custom_job, executor_args, flag, resolve_inputs

    settings, first, _ = two_runs
    spec = yaml.safe_load(
        open(compile_pipeline("vertex", settings, tmp_path / "vertex.yaml"), encoding="utf-8")
    )
    run_outputs = task_outputs(Path(first["run_dir"]))
    produced = {task: out.get("parameterValues", {}) for task, out in run_outputs.items()}
    produced["model-from-job"] = {"Output": first["model"]}  # the Vertex-only locator step
    produced["final-scheduling"] = final_scheduling.python_func(  # the Vertex-only capacity step
        strategy=settings.machines.final_scheduling,
        max_wait_hours=settings.machines.max_wait_hours,
    )._asdict()
    produced["find-parent-model"] = {
        "Output": False,
        "json_display_name": settings.cloud.model_display_name,
    }
    inputs = resolve_inputs(spec, produced, overrides={"location": "europe-west4"})

    # HPT job: the tune component's inputs → the payload → the launcher's request.
    tune = inputs["tune-on-vertex"]
    names = set(hpt_job.hpt_job_payload.__kwdefaults__ or {}) | {
        "display_name",
        "study_spec_metrics",
        "study_spec_parameters",
        "study_spec_algorithm",
        "study_spec_measurement_selection_type",
        "max_trial_count",
        "parallel_trial_count",
        "max_failed_trial_count",
        "worker_pool_specs",
        "base_output_directory",
    }
    request = hpt_job.launcher_request(
        hpt_job.hpt_job_payload(**{k: tune[k] for k in names if k in tune})
    )
    assert [p.parameter_id for p in request.study_spec.parameters] == [
        "learning_rate",
        "momentum",
        "num_units",
    ]
    assert request.max_trial_count == settings.study.max_trials
    assert request.trial_job_spec.worker_pool_specs[0].replica_count == 1

    # Custom job: GCPC's launcher with the API call replaced.
    sent = capture_custom_job(monkeypatch)
    args = executor_args(spec, "custom-training-job", inputs["custom-training-job"])
    custom_job_runner.create_custom_job(
        type="CustomJob",
        project="my-project",
        location="europe-west4",
        payload=flag(args, "--payload"),
        gcp_resources=str(tmp_path / "custom_job_resources"),
    )
    pools = sent["job"].job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, settings.training.workers]
    best_flags = {contract.flag(k, v) for k, v in first["best_parameters"].items()}
    for pool in pools:
        assert best_flags <= set(pool.container_spec.args), (best_flags, pool.container_spec.args)
        assert pool.container_spec.image_uri == settings.images.trainer_image
    assert sent["job"].job_spec.scheduling.restart_job_on_worker_restart is True

    # Model upload (a first version): GCPC's launcher, the LRO call replaced.
    captured: dict = {}

    class Lro:
        def __init__(self, location):
            pass

        def create_lro(self, url, request, gcp_resources):
            captured["url"], captured["request"] = url, json.loads(request)
            return {}

        def poll_lro(self, lro):
            return {"response": {"model": "projects/p/locations/l/models/9"}}

    monkeypatch.setattr(lro_remote_runner, "LroRemoteRunner", Lro)
    monkeypatch.setattr(upload_runner, "lro_remote_runner", lro_remote_runner)
    upload_args = executor_args(spec, "model-upload-2", inputs["model-upload-2"])
    executor_input = {
        "inputs": {
            "artifacts": {
                "unmanaged_container_model": {
                    "artifacts": [
                        {
                            "uri": first["model"],
                            "metadata": {
                                "containerSpec": {"imageUri": settings.images.serving_image}
                            },
                        }
                    ]
                }
            }
        },
        "outputs": {
            "artifacts": {"model": {"artifacts": [{"name": "m", "uri": ""}]}},
            "outputFile": str(tmp_path / "upload" / "executor_output.json"),
        },
    }
    upload_runner.upload_model(
        type="UploadModel",
        project="my-project",
        location="europe-west4",
        payload=flag(upload_args, "--payload"),
        gcp_resources=str(tmp_path / "upload_resources"),
        executor_input=json.dumps(executor_input),
    )
    written = json.loads((tmp_path / "upload" / "executor_output.json").read_text())
    assert written["artifacts"]["model"]["artifacts"][0]["metadata"]["resourceName"] == (
        "projects/p/locations/l/models/9"
    )
    assert captured["url"].endswith("/projects/my-project/locations/europe-west4/models:upload")
    model = Model.pb(Model())
    json_format.ParseDict(captured["request"]["model"], model)  # strict: unknown fields refused
    assert model.display_name == settings.cloud.model_display_name
    assert model.artifact_uri == first["model"]
    assert model.container_spec.image_uri == settings.images.serving_image


def test_trials_and_models_as_json_from_the_command_line(two_runs):
    from typer.testing import CliRunner

    from pipelines.app.cli import app

    settings, first, _ = two_runs
    result = CliRunner().invoke(app, ["trials", settings.local.output, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [t["id"] for t in data["trials"]][0] == first["best_trial_id"]
    assert {t["row"]["parameters"]["num_units"] for t in data["trials"]} == {64, 128, 256}
    # Every trial's resolved precision, read from its log (the table's precision column).
    assert {t["row"]["precision"] for t in data["trials"]} <= {"float32", "mixed_bfloat16"}
    result = CliRunner().invoke(
        app, ["models", "--registry", settings.local.registry, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert [card["version"] for card in json.loads(result.stdout)] == [1]


def test_a_fresh_study_leaves_every_path_the_first_version_recorded_true(two_runs, tmp_path):
    """Issue 51, case 2: other settings into the output keep the old study, and version 1's
    card, `models` and `lineage` still lead to that study's own trials (last: it moves the
    output's study on)."""
    from pipelines.lineage import local as local_lineage_lib

    settings, first, _ = two_runs
    card = registry.list_models(settings.local.registry)[0]
    own = trials.read_trials(first["trials"])
    # Another study (epochs is a study setting), as cheap as one: a trial, a lone chief, untracked.
    other = settings.replace(
        epochs=1,
        max_trials=1,
        parallel_trials=1,
        workers=0,
        tracking="off",
        registry=str(tmp_path / "registry"),
    )
    run_local(other, echo=lambda line: None, fresh_when_different=True)

    study = Path(card["lineage"]["study"])
    assert trials.read_trials(str(study / trials.TRIALS_FILE)) == own  # not the new study's
    for trial in own:
        assert Path(trial["local"]["logPath"]).is_file()
    graph = local_lineage_lib.local_lineage(Path(first["run_dir"]))
    models = [n.uri for n in graph.nodes.values() if n.kind == "trial"]
    assert len(models) == len(own) and all(Path(uri).is_relative_to(study) for uri in models)
    assert Path(graph.nodes[f"trial:{first['best_trial_id']}"].uri).is_dir()
