"""JobSet's pod name rule on the names we give: multi-node trials and final TrainJobs get pods.

JobSet's webhook (v0.10.1 `pkg/webhooks/jobset_webhook.go` l.231-241, v0.12.0 l.244-255)
refuses a JobSet whose longest pod name, `placement.GenPodName(js, rjob, lastJob, lastPod)`
plus `-abcde`, is over 63 characters. Katib names a trial `<experiment>-<8 characters>` and
its TrainJob after it; Trainer v2 names the JobSet after the TrainJob.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.kubeflow import trainjob
from pipelines.targets.kubeflow.kube import jobset_longest_pod_name, jobset_name_room
from pipelines.targets.kubeflow.tfjob import TFJobError
from pipelines.targets.kubeflow.trial_template import KatibSpecError
from tests.test_kubeflow_katib import build

STUDY = "/mnt/hpt/runs/r1/study"
DISPLAY = "flowers-classifier-v2"
NODE_COUNTS = (2, 9, 10, 11, 100, 101, 1000, 123456)


def trial_of(experiment: str) -> str:
    return experiment + "-abcdefgh"  # suggestionclient.go l.177: `<experiment>-<8 random>`


def test_the_rule_is_jobsets_longest_pod_name_with_its_suffix():
    """GenPodName: `<jobset>-<rjob>-<job index>-<pod index>`, then `-abcde`."""
    assert jobset_longest_pod_name("js", "node", 1, 4) == "js-node-0-3-abcde"
    assert jobset_longest_pod_name("js", "worker", 3, 12) == "js-worker-2-11-abcde"
    assert jobset_name_room("node", 2) == 63 - len("-node-0-1-abcde") == 48
    assert jobset_name_room("node", 11) == 47


def test_the_issues_name_is_one_character_over():
    """Today's 40-character Experiment: a 49-character trial, a 64-character pod name."""
    before = "flowers-classifier-v2-stu-hpt-e1ce741e33"
    assert len(before) == 40 and len(trial_of(before)) == 49
    assert len(jobset_longest_pod_name(trial_of(before), "node", 1, 2)) == 64


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_every_trial_pod_name_fits_for_any_node_count(nodes):
    name = katib.experiment_name(f"{DISPLAY}-study", STUDY, nodes)
    assert len(name) <= 40
    assert len(jobset_longest_pod_name(trial_of(name), trainjob.NODE, 1, nodes)) <= 63
    assert name.startswith("flowers-classifier-v2") or nodes > 100  # readable while it can be


def test_one_node_trials_keep_katibs_forty_characters():
    """A one-node trial is a batch Job, not a JobSet: the name is as it was."""
    name = katib.experiment_name(f"{DISPLAY}-study", STUDY)
    assert name == katib.experiment_name(f"{DISPLAY}-study", STUDY, 1)
    assert len(name) == 40 and name.startswith("flowers-classifier-v2-stu-hpt-")


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_every_final_trainjob_pod_name_fits_for_any_node_count(nodes):
    name = trainjob.trainjob_name(f"{DISPLAY}-final-with-a-long-tail", "/mnt/hpt/final", nodes)
    assert len(jobset_longest_pod_name(name, trainjob.NODE, 1, nodes)) <= 63


def test_a_given_experiment_name_too_long_for_its_trials_pods_is_refused_in_one_line():
    name = "flowers-classifier-v2-stu-hpt-e1ce741e33"
    build(name=name)  # one node per trial: a Job, Katib's 40 characters
    with pytest.raises(KatibSpecError) as err:
        build(name=name, nodes=2)
    assert str(err.value) == (
        f"experiment name {name!r}: at most 39 characters with 2 nodes per trial: JobSet's "
        "webhook refuses a trial whose longest pod name, "
        f"'{name}-abcdefgh-node-0-1-abcde', is over 63 characters"
    )


def test_a_final_trainjob_name_too_long_for_its_pods_is_refused_in_one_line():
    from pipelines.targets.kubeflow.kube import ReplicaPods
    from tests.test_kubeflow_katib import pools

    chief = pools()[0]
    specs = [chief, {**chief, "replica_count": 1}]
    pods = ReplicaPods(cpu="2", memory="8Gi")
    name = "x" * 48
    where = ("team", specs, "/mnt/hpt/f", pods)
    trainjob.build_trainjob(name, *where, override_field=trainjob.PATCHES)
    with pytest.raises(TFJobError, match=r"^TrainJob name 'x{49}': at most 48 characters with 2"):
        trainjob.build_trainjob(name + "x", *where, override_field=trainjob.PATCHES)


def test_manifests_name_a_multi_node_study_whose_trial_pods_can_be_created(tmp_path: Path):
    """The issue's case through the CLI: display_name flowers-classifier-v2, 2 nodes a trial."""
    config = tmp_path / "kubeflow.yaml"
    config.write_text(f"display_name: {DISPLAY}\nkubeflow_trial_nodes: 2\nkubeflow_job_api: auto\n")
    out = tmp_path / "manifests"
    args = ["manifests", "--target", "kubeflow", "--namespace", "team-a", "--config", str(config)]
    result = CliRunner().invoke(cli.app, [*args, "--output", str(out)])
    assert result.exit_code == 0, result.output
    for path in out.rglob("experiment*.yaml"):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        pod = jobset_longest_pod_name(trial_of(name), trainjob.NODE, 1, 2)
        assert len(pod) <= 63, f"{path.name}: {pod} ({len(pod)} characters)"
