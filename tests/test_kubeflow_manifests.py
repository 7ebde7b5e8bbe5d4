"""`hpt-pipeline manifests --target kubeflow`: the objects a run creates, as reviewable YAML."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.settings import Settings
from pipelines.targets.kubeflow import experiment, katib_rules, manifests, tfjob
from tests.support import tfjob_from_manifest, tfjob_replica_counts
from trainer.flags import parse_args


def test_the_command_writes_the_experiment_the_tfjob_and_the_rbac(tmp_path):
    out = tmp_path / "manifests"
    result = CliRunner().invoke(
        cli.app, ["manifests", "--output", str(out), "--namespace", "team-a"]
    )
    assert result.exit_code == 0, result.output
    # kubeflow_job_api: auto (the default): the TFJob, and the TrainJob with its runtime in a
    # folder of their own (a dry run of the top folder checks what every cluster serves).
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml")) == sorted(
        [*manifests.FILES, manifests.RUNTIME_FILE, *manifests.TRAINJOB_FILES]
    )
    (exp,) = yaml.safe_load_all((out / "experiment.yaml").read_text())
    katib_rules.check_experiment(exp)  # Katib's admission rules
    assert experiment.round_trip(exp)  # Katib's typed models and the kubernetes serializer
    assert exp["metadata"]["namespace"] == "team-a"
    assert exp["spec"]["resumePolicy"] == "Never"  # what a run without study_dir creates
    (job,) = yaml.safe_load_all((out / "tfjob.yaml").read_text())
    tfjob.validate_tfjob(job)
    assert tfjob.to_manifest(tfjob_from_manifest(job)) == job
    for rtype, replica in job["spec"]["tfReplicaSpecs"].items():  # out of Istio injection
        assert replica["template"]["metadata"]["annotations"] == {
            "sidecar.istio.io/inject": "false"
        }, rtype
    trial_pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]
    assert trial_pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    access = list(yaml.safe_load_all((out / "rbac.yaml").read_text()))
    role = next(d for d in access if d["kind"] == "Role")
    verbs = {res: set(r["verbs"]) for r in role["rules"] for res in r["resources"]}
    assert {"create", "get", "watch", "patch"} <= verbs["experiments"]
    assert {"create", "get", "delete"} <= verbs["tfjobs"] and "get" in verbs["pods/log"]
    assert "metrics-collector-injection=enabled" in result.output


def test_the_trial_template_runs_the_trainer_with_every_flag_the_study_can_set(tmp_path):
    docs = manifests.build(Settings(data_pvc="hpt-data", workers=2))
    (exp,) = docs["experiment.yaml"]
    pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["python", "-m", "trainer.task"]
    assert (
        "--seed=42" in container["args"] and "--data=/mnt/hpt/example/dataset" in container["args"]
    )
    ids = [p["name"] for p in exp["spec"]["parameters"]]
    assert [f"--{i}=${{trialParameters.{i}}}" for i in ids] == container["args"][-len(ids) :]
    # Katib substitutes each proposed value as text: the trainer's parser takes every bound.
    data = tmp_path / "d"
    data.mkdir()
    (data / "metadata.json").write_text("{}")
    for p in exp["spec"]["parameters"]:
        space = p["feasibleSpace"]
        for value in space.get("list") or [space["min"], space["max"]]:
            parse_args([f"--data={data}", f"--{p['name']}={value}"])
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "hpt-data"
    (job,) = docs["tfjob.yaml"]
    assert tfjob_replica_counts(job) == {"Chief": 1, "Worker": 2}


def test_manifests_refuse_another_target_in_one_line(tmp_path):
    result = CliRunner().invoke(
        cli.app, ["manifests", "--output", str(tmp_path / "m"), "--target", "vertex"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "hpt-pipeline: error: --target=vertex: manifests are for kubeflow (Vertex takes no CRDs)"
    ]
    assert not (tmp_path / "m").exists()
