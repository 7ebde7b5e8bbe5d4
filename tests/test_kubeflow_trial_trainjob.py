"""Multi-node Katib trials as TrainJobs (Katib 0.19+), and one job-kind choice for both steps.

The trial template is rendered as Katib's controller renders it for one Trial
(`tests/katib_controller.py:render_run_spec`) and checked against Trainer v2.1.0's and v2.3.0's CRD
schemas (tests/crds, unknown fields refused); the tune step runs through the real
`kubernetes` client with only HTTP faked (`fake_kube`), as do the RBAC checks below.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.settings import Settings, SettingsError
from pipelines.targets.kubeflow import (
    final_job,
    job_kind,
    katib_tune,
    manifests,
    rbac,
    trainjob,
    trainjob_checks,
)
from pipelines.targets.kubeflow.experiment import EXPERIMENT_POD_LABEL
from pipelines.targets.kubeflow.job_kind import JobKindError, Kinds
from pipelines.targets.kubeflow.katib_rules import check_experiment
from pipelines.targets.kubeflow.kube import ReplicaPods
from pipelines.targets.kubeflow.trial_trainjob import TRIAL_RESOURCE
from pipelines.targets.kubeflow.waiting import KubeflowJobError
from tests import katib_controller
from tests.fake_kube import Cluster, call_with_request
from tests.support import with_pods
from tests.test_kubeflow_katib import KATIB_TRIALS, SUCCEEDED, as_kfp_renders, build, component_args
from tests.test_kubeflow_katib import pools as trial_pools
from tests.test_kubeflow_trainjob import FIELD, RELEASES, validate
from tests.test_kubeflow_trainjob import run as run_final
from trainer import cluster as trainer_cluster

PODS = ReplicaPods(cpu="1", memory="1Gi")
TRIAL = "hpt-study-x7k2p9qz"  # a Trial's name: the Experiment's and a suffix, as Katib names it
KATIB_019 = [TRIAL_RESOURCE, "Job.v1.batch", "TFJob.v1.kubeflow.org"]  # katib-with-kubeflow 0.19


# --------------------------------------------------------------------------- one choice


def test_one_node_trials_are_jobs_whatever_runs_the_final_job() -> None:
    assert job_kind.kinds("tfjob") == Kinds(trial="Job", final="TFJob")
    assert job_kind.kinds("trainjob", 1) == Kinds(trial="Job", final="TrainJob")
    assert job_kind.kinds("trainjob", 3) == Kinds(trial="TrainJob", final="TrainJob")
    assert [job_kind.trial_kind(n) for n in (1, 2)] == ["Job", "TrainJob"]


def test_multi_node_trials_make_auto_a_trainjob_and_refuse_tfjob_in_one_line() -> None:
    assert [job_kind.job_api_setting(s, 1) for s in ("auto", "tfjob", "trainjob")] == [
        "auto",
        "tfjob",
        "trainjob",
    ]
    assert job_kind.job_api_setting("auto", 2) == "trainjob"
    assert job_kind.job_api_setting("trainjob", 4) == "trainjob"
    with pytest.raises(JobKindError) as err:
        job_kind.job_api_setting("tfjob", 2)
    assert str(err.value) == (
        "trial_workers=1 with kubeflow_job_api=tfjob: multi-worker trials run as Katib "
        "TrainJob trials (Katib 0.19+, Kubeflow Trainer v2); set kubeflow_job_api: trainjob "
        "(or auto), or trial_workers: 0"
    )
    with pytest.raises(JobKindError, match=r"trial_workers=1 with kubeflow_job_api=tfjob"):
        job_kind.kinds("tfjob", 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: job_kind.trial_kind(0), "trial_nodes=0: expected an integer >= 1"),
        (lambda: job_kind.trial_kind(2.5), "trial_nodes=2.5: expected an integer >= 1"),
        (lambda: job_kind.job_api_setting("auto", -1), "trial_nodes=-1: expected"),
        (
            lambda: job_kind.job_api_setting("tfjobs", 1),
            "kubeflow_job_api='tfjobs': expected one of auto, tfjob, trainjob",
        ),
        (
            lambda: job_kind.kinds("auto"),
            "job API 'auto': expected one of tfjob, trainjob (resolved)",
        ),
    ],
)
def test_bad_kind_inputs_are_refused_naming_the_value(call: Any, message: str) -> None:
    with pytest.raises(JobKindError) as err:
        call()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- the trial TrainJob


def assignments(exp: dict[str, Any]) -> dict[str, str]:
    """A value for every Experiment parameter, as Katib's suggestion gives them (strings)."""
    out = {}
    for p in exp["spec"]["parameters"]:
        space = p["feasibleSpace"]
        out[p["name"]] = space["list"][0] if "list" in space else space["min"]
    return out


def trial_experiment(release: str = "2.3", **changes: Any) -> dict[str, Any]:
    options: dict[str, Any] = dict(
        nodes=2,
        override_field=FIELD[release],
        service_account="hpt-runner",
        pvc_name="hpt-data",
        data_mount_path="/mnt/hpt",
        base_output_directory="/mnt/hpt/runs/r1/study",
    )
    options.update(changes)
    return build(**options)


def rendered(exp: dict[str, Any]) -> dict[str, Any]:
    return katib_controller.render_run_spec(
        exp, assignments(exp), trial_name=TRIAL, namespace="team"
    )


def env_of(trainjob_body: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in trainjob_body["spec"]["trainer"]["env"]}


@pytest.mark.parametrize("release", RELEASES)
def test_a_multi_node_trial_is_a_trainjob_each_release_admits(release: str) -> None:
    exp = trial_experiment(release)
    check_experiment(exp)  # Katib's admission rules, in its webhook's order
    template = exp["spec"]["trialTemplate"]
    assert template["primaryContainerName"] == "node"
    assert template["primaryPodLabels"] == {
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    assert (
        template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    )
    assert template["failureCondition"] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    job = rendered(exp)
    assert (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert job["metadata"] == {"name": TRIAL, "namespace": "team"}
    validate(job, release, "trainjobs")  # the release's own override field, strictly
    other = "2.1" if release == "2.3" else "2.3"
    with pytest.raises(Exception, match=FIELD[release]):
        validate(job, other, "trainjobs")
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 2
    assert trainer["args"][-len(assignments(exp)) :] == [
        f"--{k}={v}" for k, v in assignments(exp).items()
    ]
    env = env_of(job)
    assert env["HPT_NUM_NODES"] == "2"
    assert env["HPT_NODE_ADDRESS"] == f"{TRIAL}-node-0-{{index}}.{TRIAL}:2222"
    assert env["CLOUD_ML_TRIAL_ID"] == TRIAL
    assert env["AIP_MODEL_DIR"] == f"/mnt/hpt/runs/r1/study/{TRIAL}/model/"
    assert env["CLOUD_ML_HP_METRIC_FILE"] == "/tmp/hypertune/output.metrics"
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "2", "memory": "8Gi"}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"  # no GPU asked for: none shown
    assert job["spec"]["runtimeRef"]["name"] == trainjob.RUNTIME_NAME


@pytest.mark.parametrize("release", RELEASES)
def test_the_trial_pods_carry_the_experiment_label_claim_and_account(release: str) -> None:
    job = rendered(trial_experiment(release))
    (entry,) = job["spec"][FIELD[release]]
    if release == "2.1":
        meta, spec = entry["metadata"], entry["spec"]
        assert entry["targetJobs"] == [{"name": "node"}]
    else:
        (node,) = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        meta, spec = (
            node["template"]["spec"]["template"]["metadata"],
            node["template"]["spec"]["template"]["spec"],
        )
    assert meta["labels"] == {EXPERIMENT_POD_LABEL: "hpt-study"}  # the tune step's pod watch
    assert meta["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert spec["serviceAccountName"] == "hpt-runner"
    assert spec["volumes"] == [
        {"name": "hpt-data", "persistentVolumeClaim": {"claimName": "hpt-data"}}
    ]
    assert spec["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "hpt-data", "mountPath": "/mnt/hpt"}]}
    ]


def test_the_trainer_forms_its_cluster_from_the_rendered_trial_alone() -> None:
    env = env_of(rendered(trial_experiment(nodes=3)))
    second = trainer_cluster.tf_config_from_indexed_job({**env, "JOB_COMPLETION_INDEX": "1"})
    assert second == {
        "cluster": {"worker": [f"{TRIAL}-node-0-{i}.{TRIAL}:2222" for i in range(3)]},
        "task": {"type": "worker", "index": 1},
    }
    chief = trainer_cluster.tf_config_from_indexed_job({**env, "JOB_COMPLETION_INDEX": "0"})
    assert trainer_cluster.is_chief(chief["cluster"], "worker", 0)  # node 0: Katib's primary pod


def test_a_one_node_trial_stays_the_batch_job() -> None:
    template = build(nodes=1)["spec"]["trialTemplate"]
    assert template["trialSpec"]["kind"] == "Job" and "primaryPodLabels" not in template
    assert template["primaryContainerName"] == "training-container"


def test_the_trial_trainjob_parses_with_kubeflow_trainer_api() -> None:
    models = pytest.importorskip("kubeflow_trainer_api.models")
    typed = models.TrainerV1alpha1TrainJob.from_dict(rendered(trial_experiment("2.3", nodes=4)))
    assert typed.spec.trainer.num_nodes == 4


# --------------------------------------------------------------------------- the tune step


def tune(cluster: Cluster, lines: list[str], **changes: Any) -> Any:
    args = component_args(Path("/nonexistent"), **changes)
    for key in ("trials", "data_pvc", "data_mount_path"):
        args.pop(key)
    args.update(pvc_name="hpt-data", data_mount_path="/mnt/hpt", trial_nodes=2)
    args.update(job_api_setting="auto")
    args.update({k: v for k, v in changes.items() if k in ("trial_nodes", "job_api_setting")})
    if "worker_pool_specs" not in changes:  # the trial job spec's pools: trial_workers + 1
        args["worker_pool_specs"] = as_kfp_renders(trial_pools(int(args["trial_nodes"]) - 1))
    args.update(api=cluster.custom, core_api=cluster.core, sleep=lambda s: None, echo=lines.append)
    return call_with_request(katib_tune.run_katib_study, katib_tune.StudyRequest, args)


def katib_cluster(release: str = "2.1", **options: Any) -> Cluster:
    values: dict[str, Any] = dict(trainer=release, katib_trial_resources=KATIB_019)
    values.update(options)
    cluster = Cluster(**values)
    cluster.statuses = [{**SUCCEEDED, "trials": 8}]
    cluster.trials = KATIB_TRIALS
    return cluster


@pytest.mark.parametrize("release", RELEASES)
def test_the_tune_step_runs_trainjob_trials_in_the_served_field(release: str) -> None:
    cluster, lines = katib_cluster(release), []  # a TFJob API is served too: auto is not used
    done, trials = tune(cluster, lines, job_api_setting="auto")
    assert len(trials) == 6
    ((plural, _),) = cluster.objects
    exp = cluster.objects[(plural, done["metadata"]["name"])]
    validate(rendered_with(exp), release, "trainjobs")
    assert "cluster: trainjobs.trainer.kubeflow.org/v1alpha1 served" in lines
    assert f"ConfigMap kubeflow/katib-config: Katib runs {TRIAL_RESOURCE} trials" in lines
    assert f"ClusterTrainingRuntime {trainjob.RUNTIME_NAME}: installed" in lines


def rendered_with(exp: dict[str, Any]) -> dict[str, Any]:
    return katib_controller.render_run_spec(
        exp, assignments(exp), trial_name=TRIAL, namespace="team"
    )


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (
            lambda: katib_cluster(katib_trial_resources=["Job.v1.batch", "TFJob.v1.kubeflow.org"]),
            f"ConfigMap kubeflow/katib-config: trialResources lacks {TRIAL_RESOURCE}",
        ),
        (
            lambda: katib_cluster(trainer=None),
            "kubeflow_job_api=trainjob: the cluster serves no TrainJob API",
        ),
        (
            lambda: katib_cluster(runtime_installed=False),
            f"ClusterTrainingRuntime {trainjob.RUNTIME_NAME}: not installed",
        ),
    ],
)
def test_what_cannot_run_trainjob_trials_is_refused_before_the_study(
    cluster: Any, message: str
) -> None:
    made = cluster()
    with pytest.raises(KubeflowJobError) as err:
        tune(made, [])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert made.objects == {}  # nothing created, no dry run stored


def test_tfjob_with_multi_node_trials_is_refused_before_any_call() -> None:
    cluster = katib_cluster()
    with pytest.raises(JobKindError, match="kubeflow_job_api=tfjob"):
        tune(cluster, [], job_api_setting="tfjob")
    assert cluster.calls == []


def test_trial_pools_other_than_the_compiled_node_count_are_refused_before_any_call() -> None:
    """`submit --param trial_workers=2` on a spec compiled for 2 nodes per trial."""
    from pipelines.targets.kubeflow.trial_template import KatibSpecError

    cluster = katib_cluster()
    with pytest.raises(KatibSpecError) as err:
        tune(cluster, [], worker_pool_specs=as_kfp_renders(trial_pools(2)))
    assert str(err.value) == (
        "worker_pool_specs: 3 replicas, expected 2; a Katib trial here runs one pod per node "
        "(a chief and trial_workers=1 workers)"
    )
    assert cluster.calls == []


@pytest.mark.parametrize(
    ("forbidden", "trial_resources"), [(("configmaps",), KATIB_019), ((), None)]
)
def test_an_unreadable_katib_config_is_said_and_skipped(
    forbidden: tuple[str, ...], trial_resources: list[str] | None
) -> None:
    cluster = katib_cluster(forbidden=forbidden, katib_trial_resources=trial_resources)
    lines: list[str] = []
    tune(cluster, lines)
    why = "not readable by this service account" if forbidden else "not found"
    assert f"ConfigMap kubeflow/katib-config: {why}, Katib's trial resources not checked" in lines


# --------------------------------------------------------------------------- RBAC vs the calls

# Non-resource URLs every authenticated account reads (the `system:discovery` ClusterRole).
DISCOVERY = re.compile(r"^/(apis/[^/]+/[^/]+|openapi/v3/apis/[^/]+/[^/]+)$")
PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+))?$"
)
VERB = {"POST": "create", "DELETE": "delete", "PATCH": "patch"}


def needed(calls: list[tuple[str, str, dict[str, Any]]]) -> set[tuple[str, str, str, str]]:
    """(namespace or "", group, resource, verb) each API call needs, discovery left out."""
    out = set()
    for method, path, _ in calls:
        if DISCOVERY.match(path):
            continue
        m = PATH.match(path)
        assert m, path
        verb = VERB.get(method) or ("get" if m["name"] else "list")
        if m["resource"] == "namespaces":  # GET /api/v1/namespaces/<name>: the object itself
            out.add(("", "", "namespaces", "get"))
            continue
        out.add((m["namespace"] or "", m["group"] or "", m["resource"], verb))
    return out


def granted(docs: list[dict[str, Any]], namespace: str, group: str, resource: str, verb: str):
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        if doc["kind"] == "Role" and doc["metadata"]["namespace"] != (
            namespace or doc["metadata"]["namespace"]
        ):
            continue
        for rule in doc["rules"]:
            if (
                group in rule["apiGroups"]
                and resource in rule["resources"]
                and verb in rule["verbs"]
            ):
                return doc["kind"]
    return None


def test_the_rbac_manifests_write_grants_every_call_both_steps_make() -> None:
    cluster = katib_cluster(gpus=[2])
    tune(cluster, [], job_api_setting="auto")
    cluster.statuses = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    # The TrainJob, as after TrainJob trials (both APIs served: plain auto would take the TFJob).
    run_final(cluster, [], job_api_setting=job_kind.job_api_setting("auto", 2))
    calls = needed(cluster.calls)
    assert ("", "trainer.kubeflow.org", "clustertrainingruntimes", "get") in calls
    assert ("kubeflow", "", "configmaps", "get") in calls
    docs = [
        *rbac.manifests("team", "default-editor"),
        *rbac.katib_trainjobs("team", "default-editor"),
    ]
    missing = [c for c in sorted(calls) if granted(docs, *c) is None]
    assert missing == []
    # Cluster-scoped reads come from the ClusterRole, namespaced ones from a Role.
    assert (
        granted(docs, "", "trainer.kubeflow.org", "clustertrainingruntimes", "get") == "ClusterRole"
    )
    assert granted(docs, "team", "", "pods", "list") == "Role"


def test_katib_controller_is_allowed_to_run_trainjobs() -> None:
    role, binding, reader, reader_binding = rbac.katib_trainjobs("team")
    assert role["kind"] == "ClusterRole"
    assert {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["trainjobs"],
        "verbs": ["create", "get", "list", "watch", "delete"],
    } in role["rules"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "katib-controller", "namespace": "kubeflow"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert reader["metadata"]["namespace"] == "kubeflow"
    assert reader["rules"][0]["resourceNames"] == ["katib-config"]
    assert reader_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "default-editor", "namespace": "team"}
    ]
    assert reader_binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": reader["metadata"]["name"],
    }


# --------------------------------------------------------------------------- manifests, compile


def settings(**changes: Any) -> Settings:
    values: dict[str, Any] = dict(kubeflow_namespace="team", data_pvc="hpt-data")
    values.update(changes)
    return Settings(**values)


def test_manifests_for_multi_node_trials_write_katibs_side_and_each_releases_experiment() -> None:
    files = manifests.build(settings(kubeflow_trial_nodes=2))  # auto: the TrainJob only
    assert "tfjob.yaml" not in files
    assert {manifests.KATIB_FILE, manifests.EXPERIMENT_V21_FILE, manifests.RUNTIME_FILE} <= set(
        files
    )
    for file, release in (("experiment.yaml", "2.3"), (manifests.EXPERIMENT_V21_FILE, "2.1")):
        (exp,) = files[file]
        check_experiment(exp)
        validate(rendered_with(exp), release, "trainjobs")
    assert files[manifests.KATIB_FILE] == rbac.katib_trainjobs("team")
    (note,) = [
        n for n in manifests.notes(settings(kubeflow_trial_nodes=2)) if "trialResources" in n
    ]
    assert TRIAL_RESOURCE in note and manifests.KATIB_FILE in note
    one = manifests.build(settings())
    assert manifests.KATIB_FILE not in one and "tfjob.yaml" in one
    assert not [n for n in manifests.notes(settings()) if "trialResources" in n]


def test_manifests_with_trial_workers_write_trials_of_that_many_workers_each_release_admits(
    tmp_path: Path,
) -> None:
    """`manifests --target kubeflow` with `trial_workers: 2`: each trial a TrainJob of 3 nodes,
    rendered as Katib renders it, against the Trainer v2.3.0 and v2.1.0 CRD schemas."""
    config = tmp_path / "kubeflow.yaml"
    config.write_text(yaml.safe_dump({"trial_workers": 2, "data_pvc": "hpt-data"}))
    out = tmp_path / "out"
    args = ["manifests", "--target", "kubeflow", "--config", str(config), "--output", str(out)]
    result = CliRunner().invoke(cli.app, [*args, "--namespace", "team"])
    assert result.exit_code == 0, result.output
    for file, release in (("experiment.yaml", "2.3"), (manifests.EXPERIMENT_V21_FILE, "2.1")):
        (exp,) = yaml.safe_load_all((out / file).read_text())
        check_experiment(exp)
        trial = rendered_with(exp)
        validate(trial, release, "trainjobs")
        assert trial["spec"]["trainer"]["numNodes"] == 3


def test_manifests_refuse_tfjob_with_multi_node_trials_writing_nothing(tmp_path: Path) -> None:
    config = tmp_path / "kubeflow.yaml"
    config.write_text(yaml.safe_dump({"kubeflow_job_api": "tfjob", "kubeflow_trial_nodes": 2}))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli.app,
        [
            "manifests",
            "--target",
            "kubeflow",
            "--config",
            str(config),
            "--output",
            str(out),
            "--namespace",
            "team",
        ],
    )
    assert result.exit_code != 0
    assert "trial_workers=1 with kubeflow_job_api=tfjob" in result.output
    assert not out.exists() or not any(out.iterdir())


def test_compile_refuses_the_kubeflow_namespace_in_one_line(tmp_path: Path) -> None:
    from pipelines.compiler import compile_pipeline

    with pytest.raises(SettingsError) as err:
        compile_pipeline("kubeflow", Settings(), tmp_path / "p.yaml")
    assert str(err.value).startswith("kubeflow_namespace=kubeflow: Kubeflow's own namespace")
    assert "\n" not in str(err.value) and not (tmp_path / "p.yaml").exists()
    images = {
        "HPT_TRAINER_IMAGE": "registry.example/hpt/trainer:1",
        "HPT_COMPONENTS_IMAGE": "registry.example/hpt/components:1",
    }
    result = CliRunner().invoke(
        cli.app,
        ["compile", "--target", "kubeflow", "--output", str(tmp_path / "q.yaml")],
        env=images,
    )
    assert result.exit_code != 0 and "kubeflow_namespace=kubeflow" in result.output
    assert not (tmp_path / "q.yaml").exists()


def test_compile_carries_one_kind_choice_to_both_steps(tmp_path: Path) -> None:
    from pipelines.compiler import compile_pipeline

    multi = settings(kubeflow_trial_nodes=3)  # auto: TrainJob trials, so a TrainJob final job
    spec = next(
        yaml.safe_load_all(
            Path(compile_pipeline("kubeflow", multi, tmp_path / "a.yaml")).read_text()
        )
    )
    tasks = spec["root"]["dag"]["tasks"]
    for task in ("tune-on-katib", "train-with-tfjob"):
        assert tasks[task]["inputs"]["parameters"]["job_api"] == {
            "runtimeValue": {"constant": "trainjob"}
        }
    assert tasks["tune-on-katib"]["inputs"]["parameters"]["trial_nodes"] == {
        "runtimeValue": {"constant": 3}
    }
    with pytest.raises(SettingsError, match="trial_workers=1 with kubeflow_job_api=tfjob"):
        compile_pipeline(
            "kubeflow",
            settings(kubeflow_trial_nodes=2, kubeflow_job_api="tfjob"),
            tmp_path / "b.yaml",
        )
    with pytest.raises(SettingsError, match=r"kubeflow_trial_nodes=0: expected an integer >= 1"):
        settings(kubeflow_trial_nodes=0)


def test_the_final_step_takes_the_same_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The train step resolves what the tune step resolved: `trainjob` after TrainJob trials."""
    cluster = Cluster(trainer="2.3")  # both APIs served: plain `auto` would take the TFJob
    cluster.statuses = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    lines: list[str] = []
    run_final(cluster, lines, job_api_setting=job_kind.job_api_setting("auto", 2))
    assert [p for p, _ in cluster.objects] == ["trainjobs"]
    assert trainjob_checks.OPENAPI_PATH in [p for _, p, _ in cluster.calls]
    assert final_job.FinalJobRequest.__dataclass_fields__["job_api_setting"].default == "tfjob"


# --------------------------------------------------------------------------- exactly (mutmut)


def test_the_runtime_in_full() -> None:
    """Every field the runtime carries, and why (a typo here would run another runtime)."""
    pod = {
        "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
        "spec": {
            "restartPolicy": "Never",  # one failed node fails the job, as for the TFJob
            "securityContext": {
                "fsGroup": 1000,
                "runAsGroup": 1000,
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "node",
                    "ports": [{"name": "tf-port", "containerPort": 2222}],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }
    node = {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"backoffLimit": 0, "template": pod},
    }
    spec = {
        "mlPolicy": {"numNodes": 1},
        "template": {
            "spec": {
                "network": {"publishNotReadyAddresses": True},
                "replicatedJobs": [{"name": "node", "replicas": 1, "template": node}],
            }
        },
    }
    labels = {"trainer.kubeflow.org/framework": "tensorflow"}
    assert trainjob.runtime_manifest() == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "hpt-tensorflow-distributed", "labels": labels},
        "spec": spec,
    }
    assert trainjob.runtime_manifest(name="tf", namespace="team") == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "tf", "labels": labels, "namespace": "team"},
        "spec": spec,
    }


def test_each_trial_node_runs_the_trial_pools_image_and_command() -> None:
    trainer = rendered(trial_experiment())["spec"]["trainer"]
    assert trainer["image"] == "ghcr.io/acme/hpt-trainer:v1"
    assert trainer["command"] == ["python", "-m", "trainer.task"]


def test_katib_config_read_errors_and_an_empty_config() -> None:
    from types import SimpleNamespace

    from tests.fake_kube import refusal

    class Core:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
            assert (name, namespace) == ("katib-config", "kubeflow")
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    broken = Core(refusal(500, "InternalError", "etcd timed out"))
    with pytest.raises(KubeflowJobError) as err:
        trainjob_checks.katib_trial_resources(broken)
    assert str(err.value) == "ConfigMap kubeflow/katib-config: 500 InternalError: etcd timed out"
    assert trainjob_checks.katib_trial_resources(Core(SimpleNamespace(data=None))) == []
    assert trainjob_checks.katib_trial_resources(Core(SimpleNamespace(data={}))) == []
    with pytest.raises(KubeflowJobError) as err:
        trainjob_checks.check_katib_runs_trainjobs(Core(SimpleNamespace(data=None)))
    assert str(err.value) == (
        f"ConfigMap kubeflow/katib-config: trialResources lacks {TRIAL_RESOURCE} (multi-node "
        "trials, trial_workers > 0, run as TrainJobs): use Katib 0.19+ and add it under "
        "init.controller.trialResources, apply the katib-controller ClusterRole `hpt-pipeline "
        "manifests` writes (trainjob/katib.yaml), restart katib-controller; or set "
        "trial_workers: 0"
    )


def test_the_openapi_read_sends_the_accounts_bearer_token() -> None:
    cluster = Cluster(trainer="2.3")
    config = cluster.custom.api_client.configuration
    config.api_key = {"authorization": "tok"}
    config.api_key_prefix = {"authorization": "Bearer"}
    sent: list[dict[str, Any]] = []
    answer = cluster.request

    def request(method: str, url: str, query_params: Any = None, **kw: Any) -> Any:
        sent.append(dict(kw.get("headers") or {}))
        return answer(method, url, query_params, **kw)

    cluster.custom.api_client.request = request  # type: ignore[method-assign]
    assert trainjob_checks.trainjob_override_field(cluster.custom) == "runtimePatches"
    assert sent[-1].get("authorization") == "Bearer tok"


def test_openapi_and_runtime_read_failures_are_one_line_each() -> None:
    from types import SimpleNamespace

    from tests.fake_kube import refusal

    def failing(*_: Any, **__: Any) -> Any:
        raise refusal(500, "InternalError", "apiserver busy")

    broken = SimpleNamespace(api_client=SimpleNamespace(call_api=failing))
    with pytest.raises(KubeflowJobError) as err:
        trainjob_checks.trainjob_override_field(broken)
    assert str(err.value) == (
        "/openapi/v3/apis/trainer.kubeflow.org/v1alpha1: 500 InternalError: apiserver busy"
    )
    for answer in ({"x": 1}, None, ({"runtimePatches": {}}, 200, {})):  # not the document
        neither = SimpleNamespace(
            api_client=SimpleNamespace(call_api=lambda *a, _answer=answer, **k: _answer)
        )
        with pytest.raises(KubeflowJobError) as err:
            trainjob_checks.trainjob_override_field(neither)
        assert str(err.value) == (
            "/openapi/v3/apis/trainer.kubeflow.org/v1alpha1: the TrainJob schema has neither "
            "podTemplateOverrides nor runtimePatches: expected Kubeflow Trainer v2.1 or later"
        )
    with pytest.raises(KubeflowJobError) as err:
        trainjob_checks.check_runtime(SimpleNamespace(get_cluster_custom_object=failing))
    assert str(err.value) == (
        "ClusterTrainingRuntime hpt-tensorflow-distributed: 500 InternalError: apiserver busy"
    )
    with pytest.raises(KubeflowJobError) as err:
        trainjob_checks.check_runtime(Cluster(trainer="2.3", runtime_installed=False).custom)
    assert str(err.value) == (
        "ClusterTrainingRuntime hpt-tensorflow-distributed: not installed; apply the "
        "trainjob/trainingruntime.yaml that `hpt-pipeline manifests --target kubeflow` writes "
        "(cluster admin)"
    )


def final_pools(workers: int = 1) -> list[dict[str, Any]]:
    from tests.test_kubeflow_trainjob import pools

    return pools(workers=workers, gpus=0)


def refusal_of(specs: list[dict[str, Any]]) -> str:
    from pipelines.targets.kubeflow.tfjob import TFJobError

    with pytest.raises(TFJobError) as err:
        trainjob.build_trainjob(
            "j", "team", specs, "/mnt/hpt/f", PODS, override_field=trainjob.PATCHES
        )
    return str(err.value)


def test_pools_that_make_no_trainjob_are_refused_in_their_whole_line() -> None:
    chief, worker = final_pools()
    assert refusal_of([]) == "worker_pool_specs: empty, expected pool 0 (the chief)"
    assert refusal_of([chief, worker, worker]) == (
        "worker_pool_specs: 3 pools, a TrainJob here has one node pool (chief and workers alike; "
        "no parameter servers or evaluator)"
    )
    assert refusal_of([{**chief, "container_spec": {}}]) == (
        "worker_pool_specs[0]: needs container_spec.image_uri (a container image)"
    )
    assert refusal_of([{**chief, "replica_count": 2}]) == (
        "worker_pool_specs[0]: replica_count=2, pool 0 is the chief (1 replica)"
    )
    other = {**worker, "machine_spec": {"machine_type": "n1-highmem-8"}}
    assert refusal_of([chief, other]) == (
        "worker_pool_specs[1]: differs from pool 0 in container or machine; a TrainJob's nodes "
        "share one template (use kubeflow_job_api: tfjob for distinct pools)"
    )


def test_a_missing_replica_count_is_one_chief_and_no_worker() -> None:
    chief, worker = final_pools()
    bare_chief = {k: v for k, v in chief.items() if k != "replica_count"}
    bare_worker = {k: v for k, v in worker.items() if k != "replica_count"}
    for specs, nodes in (([bare_chief], 1), ([bare_chief, bare_worker], 1), ([chief, worker], 2)):
        job = trainjob.build_trainjob(
            "j", "team", specs, "/mnt/hpt/f", PODS, override_field=trainjob.PATCHES
        )
        assert job["spec"]["trainer"]["numNodes"] == nodes


def test_the_override_field_is_read_from_the_documents_text_too() -> None:
    text = '{"properties": {"spec": {"properties": {"runtimePatches": {}}}}}'
    assert trainjob.override_field(text) == "runtimePatches"
    assert trainjob.override_field('{"podTemplateOverrides": 1}') == "podTemplateOverrides"
    assert trainjob.override_field("{}") is None


def made(specs: list[dict[str, Any]] | None = None, **options: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(cpu="1", memory="1Gi", override_field=trainjob.PATCHES)
    values.update(options)
    pods, rest = with_pods(values)
    return trainjob.build_trainjob("j", "team", specs or final_pools(), "/mnt/hpt/f", pods, **rest)


def test_the_final_trainjobs_defaults_labels_and_runtime_kind() -> None:
    job = made(data_pvc="hpt-data", labels={"team": "a"}, runtime_kind=trainjob.RUNTIME)
    assert job["metadata"]["labels"] == {"app.kubernetes.io/part-of": "hpt-pipeline", "team": "a"}
    assert job["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    (patch,) = job["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    mounts = node["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [{"name": "hpt-data", "mountPath": "/mnt/hpt"}]  # the default mount path


@pytest.mark.parametrize(
    "machine",
    [
        {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4"},  # no count
        {
            "machine_type": "n1-standard-4",
            "accelerator_type": "NVIDIA_TESLA_T4",
            "accelerator_count": 0,
        },
        {"machine_type": "n1-standard-4", "accelerator_count": 2},  # no type
    ],
)
def test_a_gpu_is_requested_only_with_a_type_and_a_count(machine: dict[str, Any]) -> None:
    (chief,) = final_pools(workers=0)
    job = made([{**chief, "machine_spec": machine}])
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"cpu": "1", "memory": "1Gi"}


def test_an_unknown_override_field_is_named_with_the_choices() -> None:
    from pipelines.targets.kubeflow.tfjob import TFJobError

    with pytest.raises(TFJobError) as err:
        made(override_field="overrides")
    assert str(err.value) == (
        "override field 'overrides': expected one of podTemplateOverrides, runtimePatches"
    )
