"""The final job as a Kubeflow Trainer v2 TrainJob: its runtime, each release's override field.

Objects are checked against the real CRD schemas of Trainer v2.1.0 and v2.3.0 (tests/crds),
made strict the way `kubectl apply --validate=strict` is (an unknown field is an error), and
the run goes through the real `kubernetes` client with only HTTP faked (`fake_kube`).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.jobs.worker_pools import training_worker_pool_specs
from pipelines.settings import Settings, SettingsError
from pipelines.targets.kubeflow import final_job, job_api, manifests, trainjob, trainjob_checks
from pipelines.targets.kubeflow.cluster_checks import ClusterCheckError
from pipelines.targets.kubeflow.kube import ReplicaPods
from pipelines.targets.kubeflow.tfjob import TFJobError
from pipelines.targets.kubeflow.waiting import KubeflowJobError
from tests.fake_kube import Cluster, call_with_request, trainer_crd
from tests.support import with_pods
from trainer import cluster as trainer_cluster

IMAGE = "registry.example/hpt-trainer:1"
COMMAND = ["python", "-m", "trainer.task"]
ARGS = ["--data=/mnt/hpt/runs/r1/dataset", "--epochs=3"]
BASE = "/mnt/hpt/runs/r1/final"
RELEASES = ("2.1", "2.3")
FIELD = {"2.1": trainjob.V21_OVERRIDES, "2.3": trainjob.PATCHES}


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused (objects with properties and no preserve flag)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@functools.cache
def validator(release: str, what: str) -> Any:
    """A validator of the release's CRD schema (`strict`), built once."""
    crd = trainer_crd(release, what)
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == trainjob.VERSION]
    schema = strict(served["schema"]["openAPIV3Schema"])
    return jsonschema.validators.validator_for(schema)(schema)


def validate(obj: dict[str, Any], release: str, what: str) -> None:
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    error = jsonschema.exceptions.best_match(validator(release, what).iter_errors(body))
    if error is not None:
        raise error


def pools(workers: int = 2, gpus: int = 1) -> list[dict]:
    return training_worker_pool_specs(
        image_uri=IMAGE,
        command=COMMAND,
        args=ARGS,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        accelerator_type="NVIDIA_TESLA_T4" if gpus else None,
        accelerator_count=gpus,
        worker_count=workers,
    )


def build(field: str, **changes: Any) -> dict[str, Any]:
    options: dict[str, Any] = dict(
        cpu="4",
        memory="16Gi",
        override_field=field,
        service_account="hpt-runner",
        data_pvc="hpt-data",
        data_mount_path="/mnt/hpt",
    )
    options.update(changes)
    pods, rest = with_pods(options)
    return trainjob.build_trainjob("hpt-final-abc", "team", pools(), BASE, pods, **rest)


# --------------------------------------------------------------------------- the objects


@pytest.mark.parametrize("release", RELEASES)
def test_the_runtime_validates_against_each_release(release: str) -> None:
    runtime = trainjob.runtime_manifest()
    validate(runtime, release, "clustertrainingruntimes")
    spec = runtime["spec"]
    assert spec["mlPolicy"] == {"numNodes": 1}
    assert spec["template"]["spec"]["network"] == {"publishNotReadyAddresses": True}
    (node,) = spec["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node" and node["template"]["metadata"]["labels"] == trainjob.ANCESTOR
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["containers"][0]["name"] == "node"
    namespaced = trainjob.runtime_manifest(namespace="team")
    assert namespaced["kind"] == "TrainingRuntime" and namespaced["metadata"]["namespace"] == "team"


@pytest.mark.parametrize("release", RELEASES)
def test_each_releases_override_field_validates_there_and_not_in_the_other(release: str) -> None:
    job = build(FIELD[release])
    validate(job, release, "trainjobs")
    other = "2.3" if release == "2.1" else "2.1"
    with pytest.raises(jsonschema.ValidationError, match=FIELD[release]):
        validate(job, other, "trainjobs")


def test_the_strict_schema_refuses_a_misspelt_field() -> None:
    job = build(trainjob.PATCHES)
    job["spec"]["trainer"]["numNode"] = job["spec"]["trainer"].pop("numNodes")
    with pytest.raises(jsonschema.ValidationError, match="numNode"):
        validate(job, "2.3", "trainjobs")


def test_the_trainjob_field_by_field() -> None:
    job = build(trainjob.PATCHES)
    spec = job["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": trainjob.RUNTIME_NAME,
    }
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 3  # the chief + 2 workers
    assert (trainer["image"], trainer["command"], trainer["args"]) == (IMAGE, COMMAND, ARGS)
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["HPT_NUM_NODES"] == "3"
    assert env["HPT_NODE_ADDRESS"] == "hpt-final-abc-node-0-{index}.hpt-final-abc:2222"
    assert env["AIP_MODEL_DIR"] == f"{BASE}/model/" and env["TF_CPP_MIN_LOG_LEVEL"] == "2"
    amounts = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    assert trainer["resourcesPerNode"] == {"requests": amounts, "limits": amounts}
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "hpt-pipeline"
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    assert node["name"] == "node"
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert pod["spec"]["serviceAccountName"] == "hpt-runner"
    assert pod["spec"]["volumes"] == [
        {"name": "hpt-data", "persistentVolumeClaim": {"claimName": "hpt-data"}}
    ]
    assert pod["spec"]["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "hpt-data", "mountPath": "/mnt/hpt"}]}
    ]
    (override,) = build(trainjob.V21_OVERRIDES)["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert (override["metadata"], override["spec"]) == (pod["metadata"], pod["spec"])


def test_a_cpu_job_asks_for_no_gpu_and_carries_no_claim_or_account() -> None:
    job = trainjob.build_trainjob(
        "j", "team", pools(workers=0, gpus=0), BASE, ReplicaPods("2", "8Gi"),
        override_field=trainjob.PATCHES,
    )  # fmt: skip
    assert job["spec"]["trainer"]["numNodes"] == 1
    assert "nvidia.com/gpu" not in job["spec"]["trainer"]["resourcesPerNode"]["limits"]
    (patch,) = job["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["spec"] == {}


def test_the_v2_3_trainjob_parses_into_the_trainer_api_models() -> None:
    models = pytest.importorskip("kubeflow_trainer_api.models")
    job = build(trainjob.PATCHES)
    typed = models.TrainerV1alpha1TrainJob.from_dict(job)
    assert typed.spec.trainer.num_nodes == 3
    assert typed.to_dict()["spec"]["runtimePatches"][0]["manager"] == "hpt-pipeline"


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([], "empty"),
        ([{"container_spec": {}}], "needs container_spec.image_uri"),
        ([*pools()[:1], *pools()[:1], *pools()[:1]], "3 pools"),
    ],
)
def test_pools_that_make_no_trainjob_are_one_line_errors(specs: list, message: str) -> None:
    with pytest.raises(TFJobError, match=message):
        trainjob.build_trainjob(
            "j", "team", specs, BASE, ReplicaPods("1", "1Gi"), override_field=trainjob.PATCHES
        )


def test_distinct_chief_and_worker_pools_are_refused_naming_the_tfjob_path() -> None:
    chief, workers = copy.deepcopy(pools())
    workers["machine_spec"]["accelerator_count"] = 4
    with pytest.raises(TFJobError, match="one template.*kubeflow_job_api: tfjob"):
        trainjob.build_trainjob(
            "j", "team", [chief, workers], BASE, ReplicaPods("1", "1Gi"),
            override_field=trainjob.PATCHES,
        )  # fmt: skip


def test_an_unknown_override_field_is_refused() -> None:
    with pytest.raises(TFJobError, match="override field 'spec': expected one of"):
        build("spec")


@pytest.mark.parametrize("release", RELEASES)
def test_the_override_field_is_read_from_the_servers_openapi_document(release: str) -> None:
    assert (
        trainjob_checks.trainjob_override_field(Cluster(trainer=release).custom) == FIELD[release]
    )
    assert trainjob.override_field({"components": {}}) is None


# --------------------------------------------------------------------------- the setting


def test_the_setting_takes_the_three_choices_and_refuses_others() -> None:
    assert Settings().kubeflow.kubeflow_job_api == "auto"
    assert Settings(kubeflow_job_api="trainjob").kubeflow.kubeflow_job_api == "trainjob"
    with pytest.raises(SettingsError, match=r"kubeflow_job_api='pytorchjob': expected auto \|"):
        Settings(kubeflow_job_api="pytorchjob")


@pytest.mark.parametrize(
    ("tfjobs", "trainer", "setting", "chosen"),
    [
        (True, None, "auto", "tfjob"),
        (False, "2.1", "auto", "trainjob"),  # Kubeflow 1.11: Trainer v2 only
        (True, "2.3", "auto", "tfjob"),  # both: the operator that sets TF_CONFIG itself
        (True, "2.3", "trainjob", "trainjob"),
    ],
)
def test_auto_takes_what_the_cluster_serves(tfjobs, trainer, setting, chosen) -> None:
    lines: list[str] = []
    custom = Cluster(tfjob_api=tfjobs, trainer=trainer).custom
    assert job_api.resolve(custom, setting, lines.append) == chosen
    assert len(lines) == 1 and "served" in lines[0]


def test_neither_api_served_is_one_line_naming_both_remedies() -> None:
    custom = Cluster(tfjob_api=False).custom
    with pytest.raises(job_api.JobApiError) as err:
        job_api.resolve(custom, "auto")
    text = str(err.value)
    assert "\n" not in text and "serves neither" in text
    assert "Trainer v2.1+" in text and "Training Operator v1" in text
    with pytest.raises(job_api.JobApiError, match="serves no TrainJob API.*set kubeflow_job_api"):
        job_api.resolve(custom, "trainjob")


# --------------------------------------------------------------------------- `manifests`


def test_manifests_with_trainjob_write_the_runtime_and_a_trainjob_per_release(tmp_path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("kubeflow_job_api: trainjob\ndata_pvc: hpt-data\nworkers: 2\n")
    out = tmp_path / "m"
    result = CliRunner().invoke(
        cli.app,
        ["manifests", "--output", str(out), "--namespace", "team", "--config", str(config)],
    )
    assert result.exit_code == 0, result.output
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml")) == [
        "experiment.yaml",
        "rbac.yaml",
        "trainjob/trainingruntime.yaml",
        "trainjob/trainjob-v2.1.yaml",
        "trainjob/trainjob.yaml",
    ]
    assert f"kubectl apply -f {out / 'trainjob' / 'trainingruntime.yaml'}" in result.output
    (runtime,) = yaml.safe_load_all((out / "trainjob" / "trainingruntime.yaml").read_text())
    for release in RELEASES:
        validate(runtime, release, "clustertrainingruntimes")
    (current,) = yaml.safe_load_all((out / "trainjob" / "trainjob.yaml").read_text())
    (older,) = yaml.safe_load_all((out / "trainjob" / "trainjob-v2.1.yaml").read_text())
    validate(current, "2.3", "trainjobs")
    validate(older, "2.1", "trainjobs")
    assert "runtimePatches" in current["spec"] and "podTemplateOverrides" in older["spec"]
    assert current["spec"]["trainer"]["numNodes"] == 3
    assert current["metadata"]["namespace"] == "team"


def test_manifests_with_auto_write_both_kinds() -> None:
    docs = manifests.build(Settings())
    assert {"tfjob.yaml", manifests.RUNTIME_FILE, *manifests.TRAINJOB_FILES} <= set(docs)
    assert set(manifests.build(Settings(kubeflow_job_api="tfjob"))) == set(manifests.FILES)


# --------------------------------------------------------------------------- the run


def condition(kind: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(cluster: Cluster, lines: list[str], **changes: Any) -> dict[str, Any]:
    clock = Clock()
    options: dict[str, Any] = dict(
        worker_pool_specs=pools(gpus=0),
        base_output_directory=BASE,
        display_name="hpt",
        namespace="team",
        cpu="2",
        memory="8Gi",
        data_pvc="hpt-data",
        job_api_setting="auto",
        timeout_s=3600,
        poll_s=10,
        api=cluster.custom,
        core_api=cluster.core,
        clock=clock,
        sleep=clock.sleep,
        echo=lines.append,
    )
    options.update(changes)
    return call_with_request(final_job.run_final_job, final_job.FinalJobRequest, options)


@pytest.mark.parametrize("release", RELEASES)
def test_on_kubeflow_1_11_auto_runs_a_trainjob_until_complete(release: str) -> None:
    cluster = Cluster(tfjob_api=False, trainer=release)
    cluster.statuses = [
        {},
        {"conditions": [condition("Complete", "JobSetCompleted", "jobset completed")]},
    ]
    lines: list[str] = []
    done = run(cluster, lines)
    assert done["status"]["conditions"][-1]["type"] == "Complete"
    ((plural, name),) = cluster.objects
    body = cluster.objects[(plural, name)]
    assert plural == "trainjobs" and body["kind"] == "TrainJob"
    assert FIELD[release] in body["spec"]
    validate(body, release, "trainjobs")
    assert (
        "cluster: trainjobs.trainer.kubeflow.org/v1alpha1 served, used (kubeflow_job_api=auto)"
        in (lines)
    )
    assert f"ClusterTrainingRuntime {trainjob.RUNTIME_NAME}: installed" in lines
    assert f"TrainJob team/{name}: created" in lines
    posts = [p for m, p, _ in cluster.calls if m == "POST"]
    assert posts == ["/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs"]


def test_a_failed_trainjob_is_one_line_with_the_controllers_message() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3")
    cluster.statuses = [{"conditions": [condition("Failed", "JobSetFailed", "node-0 failed")]}]
    with pytest.raises(KubeflowJobError, match=r"TrainJob team/.* failed: Failed \(JobSetFailed\)"):
        run(cluster, [])


def test_a_missing_runtime_is_refused_before_the_trainjob_is_created() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3", runtime_installed=False)
    with pytest.raises(
        KubeflowJobError, match="not installed; apply the trainjob/trainingruntime.yaml"
    ):
        run(cluster, [])
    assert not cluster.objects


def test_an_unreadable_runtime_is_said_and_not_checked() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3", forbidden=("clustertrainingruntimes",))
    cluster.statuses = [{"conditions": [condition("Complete", "JobSetCompleted")]}]
    lines: list[str] = []
    run(cluster, lines)
    assert any("not readable by this service account, not checked" in line for line in lines)


def test_trainjob_asked_of_a_cluster_without_trainer_v2_is_refused_before_anything() -> None:
    cluster = Cluster()
    with pytest.raises(ClusterCheckError, match="serves no TrainJob API"):
        run(cluster, [], job_api_setting="trainjob")
    assert not cluster.objects


# --------------------------------------------------------------------------- the trainer side


def test_the_trainer_forms_tf_config_from_trainjob_env() -> None:
    given = {
        "HPT_NUM_NODES": "3",
        "HPT_NODE_ADDRESS": "j-node-0-{index}.j:2222",
        "JOB_COMPLETION_INDEX": "1",
    }
    env = dict(given)
    info = trainer_cluster.resolve(env)
    assert info.cluster == {
        "worker": ["j-node-0-0.j:2222", "j-node-0-1.j:2222", "j-node-0-2.j:2222"]
    }
    assert (info.task_type, info.task_id, info.num_training_tasks, info.is_chief) == (
        "worker",
        1,
        3,
        False,
    )
    assert '"index": 1' in env["TF_CONFIG"]
    chief = trainer_cluster.resolve({**given, "JOB_COMPLETION_INDEX": "0"})
    assert chief.is_chief  # worker 0: TensorFlow's rule, and the only one to export
    alone = {**given, "HPT_NUM_NODES": "1", "JOB_COMPLETION_INDEX": "0"}
    assert trainer_cluster.resolve(alone).is_chief and "TF_CONFIG" not in alone


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"HPT_NUM_NODES": "0"}, "HPT_NUM_NODES='0': expected an integer >= 1"),
        ({"HPT_NODE_ADDRESS": "j-node-0-0.j:2222"}, "expected host:port with {index}"),
        (
            {"JOB_COMPLETION_INDEX": "3"},
            r"JOB_COMPLETION_INDEX='3': expected an integer from 0 to 2",
        ),
        ({"JOB_COMPLETION_INDEX": ""}, "an Indexed Job's pod sets it"),
    ],
)
def test_bad_trainjob_env_is_one_line(changes: dict[str, str], message: str) -> None:
    env = {"HPT_NUM_NODES": "3", "HPT_NODE_ADDRESS": "j-{index}:1", "JOB_COMPLETION_INDEX": "0"}
    with pytest.raises(ValueError, match=message):
        trainer_cluster.resolve({**env, **changes})


def test_tf_config_given_wins_over_trainjob_env() -> None:
    given = '{"cluster": {"chief": ["a:1"]}, "task": {"type": "chief", "index": 0}}'
    env = {"TF_CONFIG": given, "HPT_NUM_NODES": "2", "HPT_NODE_ADDRESS": "x-{index}:1"}
    assert trainer_cluster.resolve(env).cluster == {"chief": ["a:1"]}


def test_compile_carries_the_job_api_choice_to_both_kubeflow_steps(tmp_path) -> None:
    from pipelines.compiler import compile_pipeline

    path = compile_pipeline(
        "kubeflow",
        Settings(kubeflow_job_api="trainjob", kubeflow_namespace="team-a"),
        tmp_path / "kubeflow.yaml",
    )
    spec = next(yaml.safe_load_all(Path(path).read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    for task in ("tune-on-katib", "train-with-tfjob"):
        assert tasks[task]["inputs"]["parameters"]["job_api"] == {
            "runtimeValue": {"constant": "trainjob"}
        }
    assert tasks["train-with-tfjob"]["taskInfo"]["name"] == (
        "Train final model (TrainJob: 1 + workers nodes)"
    )


# --------------------------------------------------------------------------- before submission


def test_submit_refuses_a_conditional_search_space_as_manifests_does() -> None:
    from pipelines.targets.kubeflow.cli.preflight import check_kubeflow_run
    from pipelines.targets.vertex.cli.preflight import check_cloud_run

    images = {
        "trainer_image": "registry.example.com/hpt/trainer:v1",
        "components_image": "registry.example.com/hpt/components:v1",
    }
    ok = Settings(
        kubeflow_host="http://kfp.example:8080",
        kubeflow_namespace="team",
        data_pvc="hpt-data",
        **images,
    )
    check_kubeflow_run(ok)
    conditional = Settings(**{**ok.flat(), "search_space": "optimizer"})
    with pytest.raises(SettingsError) as err:
        check_kubeflow_run(conditional)
    assert str(err.value) == (
        "search_space: parameter 'optimizer': conditional parameters are not supported by Katib "
        "(kubeflow target); flatten the search space"
    )
    with pytest.raises(Exception, match="conditional"):  # manifests refuses it the same way
        manifests.build(conditional)
    vertex = Settings(
        project="hpt-demo-project", pipeline_root="gs://b/r", search_space="optimizer"
    )
    check_cloud_run(Settings(**{**vertex.flat(), **images}))  # Vertex takes conditionals


@pytest.mark.parametrize("gpus", [0, 1])
def test_every_pod_runs_as_uid_1000_and_a_gpu_less_pod_sees_no_gpu(gpus: int) -> None:
    docs = manifests.build(
        Settings(
            kubeflow_namespace="team",
            trial_accelerator_count=gpus,
            final_accelerator_count=gpus,
            workers=1,
        )
    )
    (exp,) = docs["experiment.yaml"]
    (tf,) = docs["tfjob.yaml"]
    (runtime,) = docs[manifests.RUNTIME_FILE]
    (job,) = docs["trainjob/trainjob.yaml"]
    pods = [exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]]
    pods += [r["template"]["spec"] for r in tf["spec"]["tfReplicaSpecs"].values()]
    pods += [
        runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "spec"
        ]
    ]
    for pod in pods:
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        for container in pod["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            }
    envs = [
        {e["name"]: e["value"] for e in pod["containers"][0].get("env") or []} for pod in pods[:3]
    ]
    envs.append({e["name"]: e["value"] for e in job["spec"]["trainer"]["env"]})
    assert len(envs) == 4  # trial, chief, worker; the TrainJob's (its runtime's node takes it)
    for env in envs:
        assert env.get("NVIDIA_VISIBLE_DEVICES") == (None if gpus else "void")
