"""Spot capacity on Kubeflow: trial and final pods on a spot node pool, preempted trials retried."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.compiler import compile_pipeline
from pipelines.settings import Settings, SettingsError
from pipelines.targets.kubeflow import katib_rules, tfjob, trainjob
from tests.test_kubeflow_katib import build as build_experiment
from tests.test_kubeflow_tfjob import build as build_tfjob
from tests.test_kubeflow_trainjob import FIELD, RELEASES, validate
from tests.test_kubeflow_trainjob import build as build_trainjob
from tests.test_pipeline_spec import compiled, for_target

GKE = "cloud.google.com/gke-spot=true"
ON_SPOT = {
    "nodeSelector": {"cloud.google.com/gke-spot": "true"},
    "tolerations": [
        {
            "key": "cloud.google.com/gke-spot",
            "operator": "Equal",
            "value": "true",
            "effect": "NoSchedule",
        }
    ],
}


def _trial_job(exp: dict[str, Any]) -> dict[str, Any]:
    return exp["spec"]["trialTemplate"]["trialSpec"]


def _placed(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {k: pod_spec[k] for k in ("nodeSelector", "tolerations") if k in pod_spec}


def _task_input(spec: dict[str, Any], task: str, name: str) -> Any:
    inputs = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    return inputs[name]["runtimeValue"]["constant"] if name in inputs else None


def test_spot_settings_reach_the_tune_and_train_steps_on_kubeflow(tmp_path):
    """Before: `trial_scheduling=spot: Katib trials … run on the cluster's nodes` refused."""
    spec = compiled(
        tmp_path, "kubeflow", Settings(trial_scheduling="spot", final_scheduling="spot")
    )
    assert _task_input(spec, "tune-on-katib", "spot_label") == GKE
    assert _task_input(spec, "train-with-tfjob", "spot_label") == GKE
    standard = compiled(tmp_path, "kubeflow", Settings(trial_scheduling="spot"))
    assert _task_input(standard, "train-with-tfjob", "spot_label") in (None, "")


def test_flex_start_stays_refused_on_kubeflow_in_one_line(tmp_path):
    settings = for_target("kubeflow", Settings(trial_scheduling="flex_start"))
    with pytest.raises(SettingsError) as err:
        compile_pipeline("kubeflow", settings, tmp_path / "p.yaml")
    assert str(err.value) == (
        "trial_scheduling=flex_start: a cluster has no queued-capacity request here (spot is a "
        "node pool: kubeflow_spot_node_label); flex_start capacity is Vertex's (unset it, or "
        "use --target vertex)"
    )
    assert not (tmp_path / "p.yaml").exists()


def test_a_spot_trial_runs_on_the_pool_and_a_preempted_pod_is_replaced():
    """The trial Job tolerates the pool, and ignores a pod failed by a disruption (preemption).

    `backoffLimit: 0` still fails the trial on any other pod failure; the replacement pod has
    the same per-Trial `AIP_CHECKPOINT_DIR`, so the trainer resumes after its last epoch.
    """
    exp = build_experiment(spot_label=GKE, base_output_directory="/mnt/hpt/study")
    job = _trial_job(exp)
    assert _placed(job["spec"]["template"]["spec"]) == ON_SPOT
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    }
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # the policy needs it
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["AIP_CHECKPOINT_DIR"].endswith("/${trialParameters.trialName}/checkpoints/")
    katib_rules.check_experiment(exp)  # Katib's admission still passes
    standard = _trial_job(build_experiment())
    assert not _placed(standard["spec"]["template"]["spec"])
    assert "podFailurePolicy" not in standard["spec"]


def test_a_multi_node_spot_trial_puts_every_node_on_the_pool():
    exp = build_experiment(spot_label=GKE, nodes=2, override_field=trainjob.PATCHES)
    (patch,) = _trial_job(exp)["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert _placed(node["template"]["spec"]["template"]["spec"]) == ON_SPOT


def test_the_final_tfjob_replicas_run_on_the_pool():
    manifest = tfjob.to_manifest(build_tfjob(spot_label=GKE))
    for replica in manifest["spec"]["tfReplicaSpecs"].values():
        assert _placed(replica["template"]["spec"]) == ON_SPOT
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 0  # a preempted replica fails it
    for replica in tfjob.to_manifest(build_tfjob())["spec"]["tfReplicaSpecs"].values():
        assert not _placed(replica["template"]["spec"])


@pytest.mark.parametrize("release", RELEASES)
def test_the_final_trainjob_nodes_run_on_the_pool_in_each_release(release):
    job = build_trainjob(FIELD[release], spot_label=GKE)
    validate(job, release, "trainjobs")  # the release's CRD schema takes the placement
    if FIELD[release] == trainjob.V21_OVERRIDES:
        (override,) = job["spec"][trainjob.V21_OVERRIDES]
        pod = override["spec"]
    else:
        (patch,) = job["spec"][trainjob.PATCHES]
        (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        pod = node["template"]["spec"]["template"]["spec"]
    assert _placed(pod) == ON_SPOT


def test_a_spot_pod_waiting_for_the_pool_is_given_the_pending_grace():
    """Unschedulable stops a step at once; a spot pod waits for its pool (scale-up, capacity)."""
    import datetime as dt

    from pipelines.targets.kubeflow import pod_watch
    from tests.test_kubeflow_pod_watch import START, read, unschedulable

    obj = unschedulable("a")
    obj["spec"] = {"containers": [{"name": "node"}], "nodeSelector": ON_SPOT["nodeSelector"]}
    assert pod_watch.pod_problem(read(obj), START + dt.timedelta(seconds=30), 600) is None
    late = pod_watch.pod_problem(read(obj), START + dt.timedelta(seconds=601), 600)
    assert late is not None and late.startswith("pod team/a: Pending for 601s, longer than")
    standard = pod_watch.pod_problem(read(unschedulable("a")), START, 600)
    assert standard is not None and "Unschedulable" in standard
