"""The first Vertex run, second pass: what Vertex would accept and then fail or spoil.

Machine/accelerator pairs, `--param` overrides, the metric decided by its tag alone, the
`default` alias of new versions, the escaped model name, the serving container table and
its end-of-availability date, and the local-only parameters kept out of the Vertex spec.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.study_metric import study_metric
from pipelines import images
from pipelines.compiler import compile_pipeline
from pipelines.jobs import machines
from pipelines.settings import Settings, SettingsError
from pipelines.settings_space import study_metric_spec
from pipelines.targets.vertex import models, serving
from tests.test_cloud_cli import CLOUD_FLAGS, invoke, one_line_error
from tests.test_cloud_cli import clean_environment as clean_environment  # autouse: built images
from trainer.contract import ContractError


@pytest.fixture(scope="module")
def vertex_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vertex") / "pipeline.yaml"
    return Path(compile_pipeline("vertex", Settings(), str(path)))


def _spec(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _tasks(spec: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = dict(spec["root"]["dag"]["tasks"])
    for component in spec["components"].values():
        found.update(component.get("dag", {}).get("tasks", {}))
    return found


# ----------------------------------------------------------------- machines and accelerators


@pytest.mark.parametrize(
    ("machine", "accelerator", "count", "ok"),
    [
        ("n1-standard-8", "NVIDIA_TESLA_T4", 2, True),
        ("n1-standard-8", "NVIDIA_TESLA_V100", 8, True),
        ("n1-standard-32", "NVIDIA_TESLA_T4", 1, False),  # too many vCPUs for one T4
        ("a2-highgpu-1g", "NVIDIA_TESLA_T4", 1, False),  # the example
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1, True),
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 2, False),
        ("a2-highgpu-1g", "", 0, False),  # comes with its GPU
        ("g2-standard-24", "NVIDIA_L4", 2, True),
        ("e2-standard-4", "NVIDIA_TESLA_T4", 1, False),  # takes no GPU
        ("e2-standard-4", "", 0, True),
        ("n1-standard-8", "NVIDIA_TESLA_T4", -1, False),
    ],
)
def test_machine_accelerator_pairs_follow_vertexs_table(machine, accelerator, count, ok):
    if ok:
        machines.check_machine(machine, accelerator, count, what="trial_machine_type")
    else:
        with pytest.raises(machines.MachineError, match=f"^trial_machine_type={machine} with"):
            machines.check_machine(machine, accelerator, count, what="trial_machine_type")


def test_each_refusal_names_what_vertex_takes_instead():
    def refusal(machine: str, accelerator: str | None, count: int) -> str:
        with pytest.raises(machines.MachineError) as err:
            machines.check_machine(machine, accelerator, count, what="final_machine_type")
        return str(err.value)

    assert refusal("a2-highgpu-2g", None, 0) == (
        "final_machine_type=a2-highgpu-2g with 0 x no accelerator: a2-highgpu-2g comes with "
        "its GPUs (expected 2 x NVIDIA_TESLA_A100)"
    )
    assert refusal("a3-unknown-1g", None, 0) == (
        "final_machine_type=a3-unknown-1g: not a machine type of its family (expected one of "
        "a3-highgpu-1g, a3-highgpu-2g, a3-highgpu-4g, a3-highgpu-8g, a3-megagpu-8g, "
        "a3-ultragpu-8g)"
    )
    assert refusal("n1-standard-64", "NVIDIA_TESLA_T4", 2) == (
        "final_machine_type=n1-standard-64 with 2 x NVIDIA_TESLA_T4: Vertex refuses this "
        "combination (expected one of 4 x NVIDIA_TESLA_T4, 4 x NVIDIA_TESLA_P4, "
        f"8 x NVIDIA_TESLA_V100; {machines.SOURCE})"
    )
    assert refusal("e2-standard-4", "NVIDIA_TESLA_T4", 1) == (
        "final_machine_type=e2-standard-4 with 1 x NVIDIA_TESLA_T4: Vertex refuses this "
        f"combination (expected a machine type that takes GPUs; {machines.SOURCE})"
    )
    assert refusal("n1-standard-8", "NVIDIA_TESLA_T4", -1).endswith(
        ": expected an accelerator count >= 0"
    )


def test_tpus_and_no_accelerator_are_not_gpus():
    machines.check_machine("cloud-tpu", "TPU_V3", 8, what="trial_machine_type")  # not checked
    machines.check_machine("n1-standard-4", None, 0, what="trial_machine_type")
    assert machines.expected_gpus("NVIDIA_TESLA_T4", 2) == 2
    assert machines.expected_gpus("TPU_V3", 8) == 0
    assert machines.expected_gpus(None, 0) == 0 and machines.expected_gpus("", 1) == 0
    assert machines.is_gpu("NVIDIA_L4") and not machines.is_gpu(None)


def test_the_n1_rows_are_vertexs_gpu_table_by_vcpus():
    """Vertex's N1 rows, transcribed from `machines.SOURCE` by hand, against the table built.

    The module is run afresh (`runpy`) so that the table is built by this test: it is built
    when the module loads, before mutmut's fork, where no mutant of it would show.
    """
    import runpy

    up_to_8 = {"T4": (1, 2, 4), "P4": (1, 2, 4), "P100": (1, 2, 4), "V100": (1, 2, 4, 8)}
    by_cpus = {
        **dict.fromkeys((2, 4, 8), up_to_8),
        16: {**up_to_8, "V100": (2, 4, 8)},
        32: {"T4": (2, 4), "P4": (2, 4), "P100": (2, 4), "V100": (4, 8)},
        **dict.fromkeys((64, 96), {"T4": (4,), "P4": (4,), "V100": (8,)}),
    }
    families = {
        "standard": (4, 8, 16, 32, 64, 96),
        "highmem": (2, 4, 8, 16, 32, 64, 96),
        "highcpu": (16, 32, 64, 96),
    }
    expected = {
        f"n1-{family}-{cpus}": {f"NVIDIA_TESLA_{g}": n for g, n in by_cpus[cpus].items()}
        for family, sizes in families.items()
        for cpus in sizes
    }
    built = runpy.run_path(machines.__file__, run_name=machines.__name__)["GPU_MACHINES"]
    assert {m: dict(a) for m, a in built.items() if m.startswith("n1-")} == expected


@pytest.mark.parametrize("machine", ["n1-standard-3", "n1-standard-x", "n1-superfast-8"])
def test_a_name_that_is_no_n1_machine_type_is_refused_with_the_n1_pattern(machine):
    with pytest.raises(machines.MachineError) as err:
        machines.check_machine(machine, None, 0, what="trial_machine_type")
    assert str(err.value) == (
        f"trial_machine_type={machine}: not an N1 machine type (expected "
        "n1-standard|highmem|highcpu-N, N one of 1, 2, 4, 8, 16, 32, 64, 96)"
    )


def test_every_table_entry_is_a_machine_spec_the_api_parses():
    from google.cloud.aiplatform_v1 import AcceleratorType, MachineSpec

    for machine, accelerators in machines.GPU_MACHINES.items():
        for accelerator, counts in accelerators.items():
            assert accelerator in AcceleratorType.__members__, accelerator
            for count in counts:
                spec = MachineSpec(
                    machine_type=machine, accelerator_type=accelerator, accelerator_count=count
                )
                assert spec.accelerator_type.name == accelerator


def test_compiling_for_vertex_refuses_a_pair_vertex_refuses(tmp_path):
    settings = Settings(final_machine_type="a2-highgpu-1g")  # with the default T4
    with pytest.raises(SettingsError, match="final_machine_type=a2-highgpu-1g with 1 x NVIDIA"):
        compile_pipeline("vertex", settings, str(tmp_path / "p.yaml"))
    compile_pipeline("local", settings, str(tmp_path / "p.yaml"))  # locally: CPU devices


# ----------------------------------------------------------------- submit --param checks


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (
            "final_machine_type=a2-highgpu-1g",
            "--param final_machine_type=a2-highgpu-1g with 1 x NVIDIA_TESLA_T4: Vertex refuses",
        ),
        (
            'study_spec_parameters=[{"parameter_id": "bogus_flag", "double_value_spec": '
            '{"min_value": 0.1, "max_value": 0.5}, "scale_type": "UNIT_LINEAR_SCALE"}]',
            "the trainer has no flag --bogus_flag",
        ),
        (
            'study_spec_parameters=[{"parameter_id": "momentum", "double_value_spec": '
            '{"min_value": 0.5, "max_value": 1.0}, "scale_type": "UNIT_LINEAR_SCALE"}]',
            "max 1.0 is refused by the trainer",
        ),
        ("trial_accelerator_count=-1", "--param trial_accelerator_count=-1: expected an integer"),
        ("workers=-2", "--param workers=-2: expected an integer >= 0"),
        ("replicas=2", "--param replicas: say workers (the final job's workers besides the chief)"),
        ("max_trial_count=0", "--param max_trial_count=0: expected an integer >= 1"),
        ("parallel_trial_count=40", "--param parallel_trial_count=40: expected an integer in"),
        ("metric_tag=recall", "--param metric_tag='recall': expected one of val_accuracy"),
        ("metric_tag=accuracy", "--param metric_tag='accuracy': say val_accuracy (the valid"),
        ("precision=fp8", "--param precision='fp8': expected one of auto"),
        ("model_display_name=" + "m" * 129, "expected at most 128 characters"),
        ("goal=minimize", "--param goal: not a parameter of pipeline"),
        ("study_spec_metrics=[]", "--param study_spec_metrics: not a parameter"),
        ("registry_dir=/tmp/r", "--param registry_dir: not a parameter"),
    ],
)
def test_submit_dry_run_refuses_a_bad_param_in_one_line(vertex_template, tmp_path, param, message):
    out = tmp_path / "request.json"
    result = invoke(
        "submit", *CLOUD_FLAGS, f"--template={vertex_template}", f"--param={param}",
        "--dry-run", f"--output={out}",
    )  # fmt: skip
    one_line_error(result, message)
    assert not out.exists()


def test_schedule_create_checks_params_too(vertex_template):
    result = invoke(
        "schedule", "create", "--cron=0 3 * * 1", "--end-time=2026-12-01", *CLOUD_FLAGS,
        f"--template={vertex_template}", "--param=trial_machine_type=a2-highgpu-1g", "--dry-run",
    )  # fmt: skip
    one_line_error(result, "--param trial_machine_type=a2-highgpu-1g with 2 x NVIDIA_TESLA_T4")


def test_a_changed_metric_tag_changes_the_study_and_the_selection_with_it(
    vertex_template, tmp_path
):
    out = tmp_path / "request.json"
    result = invoke(
        "submit", *CLOUD_FLAGS, f"--template={vertex_template}", "--param=metric_tag=val_loss",
        "--dry-run", f"--output={out}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    values = json.loads(out.read_text())["pipelineJob"]["runtimeConfig"]["parameterValues"]
    assert values["metric_tag"] == "val_loss" and "goal" not in values
    # Every consumer of the metric reads the tag, or the one step that derives from it.
    tasks = _tasks(_spec(vertex_template))
    assert tasks["study-metric"]["inputs"]["parameters"]["metric_tag"] == {
        "componentInputParameter": "metric_tag"
    }
    from_step = {"outputParameterKey": "study_spec_metrics", "producerTask": "study-metric"}
    assert tasks["tune-on-vertex"]["inputs"]["parameters"]["study_spec_metrics"] == {
        "taskOutputParameter": from_step
    }
    select = tasks["select-best-trial"]["inputs"]["parameters"]
    assert select["study_spec_metrics"] == {"taskOutputParameter": from_step}  # goals included
    assert values.get("objectives", []) == []  # the compiled default: [metric_tag]
    trial = tasks["trial-job-spec"]["inputs"]["parameters"]["metric_tag"]
    assert trial == {"componentInputParameter": "metric_tag"}  # what the trials report
    # What the step computes for the new tag: the study waits for `val_loss`, minimized.
    metrics, goal, _ = study_metric.python_func("val_loss", [], [])
    assert (metrics, goal) == ([{"metric_id": "val_loss", "goal": 2}], "minimize")
    assert study_metric_spec("val_accuracy") == (
        [{"metric_id": "val_accuracy", "goal": 1}],
        "maximize",
    )
    with pytest.raises(ContractError, match=r"^metric_tag=accuracy: say val_accuracy \("):
        study_metric.python_func("accuracy", [], [])  # a run-time parameter the CLI did not check


# ----------------------------------------------------------------- registration


def _uploads(spec: dict[str, Any]) -> dict[str, Any]:
    tasks = _tasks(spec)
    return {n: t for n, t in tasks.items() if n.startswith("model-upload")}


@pytest.mark.parametrize("keep", [False, True])
def test_a_new_version_takes_the_default_alias_unless_kept(tmp_path, keep):
    path = compile_pipeline("vertex", Settings(keep_default_version=keep), str(tmp_path / "p.yaml"))
    uploads = _uploads(_spec(Path(path)))
    versions = [t for t in uploads.values() if "parent_model" in t["inputs"].get("artifacts", {})]
    first = [t for t in uploads.values() if t not in versions]
    assert len(versions) == 1 and len(first) == 1
    aliases = versions[0]["inputs"]["parameters"]["version_aliases"]["runtimeValue"]["constant"]
    assert aliases == ([] if keep else ["default"])
    assert "version_aliases" not in first[0]["inputs"]["parameters"]  # the first is default


def test_model_display_name_reaches_gcpcs_json_escaped(vertex_template):
    tasks = _tasks(_spec(vertex_template))
    channel = "pipelinechannel--find-parent-model-json_display_name"  # inside the If/Else
    for upload in _uploads(_spec(vertex_template)).values():
        name = upload["inputs"]["parameters"]["display_name"]
        assert name == {"componentInputParameter": channel}
    assert "find-parent-model" in tasks
    # GCPC splices the value between quotes of its JSON payload (ConcatPlaceholder).
    for raw in ('cnn "v2"', "back\\slash", "naïve\nname"):
        payload = '{"display_name": "' + models.json_string_body(raw) + '"}'
        assert json.loads(payload)["display_name"] == raw


# ----------------------------------------------------------------- serving container


def test_the_serving_container_comes_from_the_table_for_the_region(tmp_path):
    assert Settings().images.serving_image == images.SERVING_CONTAINERS[0].uri("us-central1")
    europe = Settings(region="europe-west4")
    assert (
        europe.images.serving_image
        == "europe-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    )
    assert Settings(region="asia-east1").images.serving_image.startswith("asia-docker.pkg.dev/")
    own = "europe-docker.pkg.dev/p/r/serving:v1"
    assert Settings(serving_image=own, region="us-central1").images.serving_image == own  # kept
    spec = _spec(Path(compile_pipeline("vertex", europe, str(tmp_path / "p.yaml"))))
    importer = spec["deploymentSpec"]["executors"]["exec-importer"]["importer"]
    assert importer["metadata"]["containerSpec"]["imageUri"] == europe.images.serving_image
    for container in images.SERVING_CONTAINERS:
        assert container.source.startswith("https://cloud.google.com/vertex-ai/")
        assert images.serving_container_for(container.uri("europe-west1")) == container
    assert images.serving_container_for(own) is None


EOA = images.SERVING_CONTAINERS[0].end_of_availability


@pytest.mark.parametrize(
    ("today", "until", "force", "outcome"),
    [
        (EOA - datetime.timedelta(days=60), None, False, "warning: .* no --end-time"),
        (EOA - datetime.timedelta(days=60), f"{EOA}T23:00:00Z", False, None),
        (EOA - datetime.timedelta(days=9), f"{EOA + datetime.timedelta(1)}T00:00Z", False, "runs"),
        (EOA - datetime.timedelta(days=60), f"{EOA}T00:00:00Z", False, None),
        (EOA + datetime.timedelta(days=1), None, False, SettingsError),
        (EOA + datetime.timedelta(days=1), None, True, "warning: .* created anyway"),
    ],
)  # fmt: skip
def test_schedules_are_warned_and_refused_by_the_serving_containers_date(
    today, until, force, outcome
):
    settings = Settings()
    if outcome is SettingsError:
        with pytest.raises(
            SettingsError, match=f"reached its end of availability on {EOA}.*--force"
        ):
            serving.check_availability(settings, until=until, force=force, today=today)
        return
    warning = serving.check_availability(settings, until=until, force=force, today=today)
    if outcome is None:
        assert warning is None
    else:
        assert "\n" not in warning and __import__("re").search(outcome, warning)
    assert (
        serving.check_availability(Settings(serving_image="r/own:v1"), until=None, today=today)
        is None
    )


def test_schedule_create_refuses_past_the_date_unless_forced(vertex_template, monkeypatch):
    past = images.ServingContainer("tf2-cpu.2-15", "2.15", False, datetime.date(2020, 1, 1))
    monkeypatch.setattr(images, "SERVING_CONTAINERS", (past,))
    args = ["schedule", "create", "--cron=0 3 * * 1", *CLOUD_FLAGS, f"--template={vertex_template}"]
    one_line_error(invoke(*args, "--dry-run"), "reached its end of availability on 2020-01-01")
    forced = invoke(*args, "--dry-run", "--force")
    assert forced.exit_code == 0, forced.output
    assert "created anyway (--force)" in forced.stderr


# ----------------------------------------------------------------- local-only parameters


def test_local_only_parameters_are_not_in_the_vertex_spec(vertex_template, tmp_path):
    vertex = set(_spec(vertex_template)["root"]["inputDefinitions"]["parameters"])
    local = _spec(Path(compile_pipeline("local", Settings(), str(tmp_path / "local.yaml"))))
    local_params = set(local["root"]["inputDefinitions"]["parameters"])
    hidden = {"registry_dir", "study_dir", "shared_root", "scheduler", "min_epochs"}
    hidden |= {"reduction_factor"}  # successive halving: refused on Vertex
    hidden |= {"tracking", "tracking_uri"}  # MLflow runs: written by the local/Kubeflow tune steps
    hidden |= {"dataset_dir"}  # the local run's keyed dataset folder (a rerun resumes it)
    assert hidden <= local_params and not hidden & vertex
    assert local_params - vertex == hidden
    # Spot and flex-start capacity: Vertex's only (refused locally), between the shared ones.
    assert vertex - local_params == {"trial_scheduling", "final_scheduling", "max_wait_hours"}
    # The steps that take them get the defaults as constants.
    trial = _tasks(_spec(vertex_template))["trial-job-spec"]["inputs"]["parameters"]
    assert trial["study_dir"] == {"runtimeValue": {"constant": ""}}
    assert trial["expect_gpus"] == {"runtimeValue": {"constant": True}}
    local_trial = _tasks(local)["trial-job-spec"]["inputs"]["parameters"]
    assert local_trial["expect_gpus"] == {"runtimeValue": {"constant": False}}


def test_find_parent_model_writes_the_escaped_name(tmp_path):
    from types import SimpleNamespace

    from pipelines.targets.vertex.steps.register import find_parent_model

    out = tmp_path / "json_display_name"
    model = SimpleNamespace(uri="", metadata={})
    parent = "projects/p/locations/us-central1/models/7"
    found = find_parent_model.python_func(
        display_name='cnn "v2"',
        location="us-central1",
        parent_model=parent,
        model=model,
        json_display_name=str(out),
    )
    assert found is True and model.metadata["resourceName"] == parent
    assert out.read_text() == 'cnn \\"v2\\"'
