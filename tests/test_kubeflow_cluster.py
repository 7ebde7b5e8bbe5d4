"""The tune and train steps against a standard Kubeflow cluster's API answers (`fake_kube`).

Only the Kubernetes API server is replaced: the real `kubernetes` client builds and checks
each call, and the steps' own logic runs. Each cluster condition that would fail a first
run is refused before anything is created, in one line naming the remedy; Katib's restart
of a patched Experiment is waited for.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pipelines.study.search_space import Metric, Parameter, SearchSpace
from pipelines.targets.kubeflow import cluster_checks, final_job, katib_tune
from pipelines.targets.kubeflow.cluster_checks import ClusterCheckError
from pipelines.targets.kubeflow.waiting import KubeflowJobError
from tests.fake_kube import PROFILE_LABELS, Cluster, call_with_request
from tests.test_kubeflow_katib import KATIB_TRIALS, SUCCEEDED, component_args, pools, study
from tests.test_kubeflow_tfjob import pools as final_pools

SUCCEEDED_8 = {**SUCCEEDED, "trials": 8}


def tune(cluster: Cluster, lines: list[str] | None = None, **changes: Any) -> Any:
    args = component_args(Path("/nonexistent"), **changes)
    for key in ("trials", "data_pvc", "data_mount_path"):
        args.pop(key)
    args.update(pvc_name="hpt-data", data_mount_path="/mnt/hpt")
    args.update({k: changes[k] for k in ("pvc_name", "data_mount_path") if k in changes})
    args.update(
        api=cluster.custom,
        core_api=cluster.core,
        sleep=lambda s: None,
        echo=(lines if lines is not None else []).append,
    )
    return call_with_request(katib_tune.run_katib_study, katib_tune.StudyRequest, args)


def created(cluster: Cluster) -> list[str]:
    """The objects the cluster stored (dry runs store nothing)."""
    return [f"{plural}/{name}" for plural, name in cluster.objects]


def refused(cluster: Cluster, message: str, **changes: Any) -> str:
    with pytest.raises(ClusterCheckError, match=message) as err:
        tune(cluster, **changes)
    text = str(err.value)
    assert "\n" not in text
    assert created(cluster) == []  # refused before anything was created
    return text


def ready(cluster: Cluster) -> Cluster:
    cluster.statuses = [SUCCEEDED_8]
    cluster.trials = KATIB_TRIALS
    return cluster


# --------------------------------------------------------------------------- a good cluster


def test_a_standard_profile_namespace_runs_the_study() -> None:
    cluster, lines = ready(Cluster()), []
    done, trials = tune(cluster, lines)
    assert len(trials) == 6
    (key,) = cluster.objects
    stored = cluster.objects[key]
    # Katib 0.18+ kept the log scale the study asked for.
    spaces = {p["name"]: p["feasibleSpace"] for p in stored["spec"]["parameters"]}
    assert spaces["learning_rate"]["distribution"] == "logUniform"
    # The checks ran first, through the real client: namespace, discovery, claim, dry run.
    paths = [(m, p, q) for m, p, q in cluster.calls]
    assert paths[:3] == [
        ("GET", "/api/v1/namespaces/team", {}),
        ("GET", "/apis/kubeflow.org/v1", {}),
        ("GET", "/api/v1/namespaces/team/persistentvolumeclaims/hpt-data", {}),
    ]
    dry, real = [c for c in cluster.calls if c[0] == "POST"]
    assert dry[2] == {"dryRun": "All"} and real[2] == {}
    assert lines[:3] == [
        "namespace team: Kubeflow profile, Katib metrics collector on; Istio injection on "
        "(istio-injection=enabled); trial and TFJob pods opt out",
        "cluster: tfjobs.kubeflow.org/v1 served",
        "data_pvc=hpt-data: ReadWriteMany",
    ]


# --------------------------------------------------------------------------- each condition


def test_no_tfjob_api_kubeflow_1_11_is_refused_before_the_study() -> None:
    text = refused(Cluster(tfjob_api=False), "serves no TFJob API")
    assert "Kubeflow 1.11+ installs Kubeflow Trainer v2" in text
    assert "install the Training Operator v1 beside it" in text


def test_katib_0_17_dropping_a_log_scale_is_refused() -> None:
    text = refused(Cluster(katib="0.17"), r"parameters learning_rate: .*dropped")
    assert "upgrade Katib to 0.18+ (Kubeflow 1.10+) or give them scale linear" in text


def test_katib_0_17_runs_a_study_without_log_scales() -> None:
    linear = SearchSpace(
        parameters=(Parameter("momentum", "double", min=0.1, max=0.9, scale="linear"),),
        metrics=(Metric("val_accuracy", "maximize"),),
    )
    cluster = ready(Cluster(katib="0.17"))
    cluster.trials = []
    tune(cluster, **study(linear))
    assert len(created(cluster)) == 1


def test_an_existing_experiment_that_lost_its_log_scale_is_refused() -> None:
    cluster = ready(Cluster())
    tune(cluster)
    for obj in cluster.objects.values():  # as Katib 0.17 stored it
        for p in obj["spec"]["parameters"]:
            p["feasibleSpace"].pop("distribution")
    with pytest.raises(ClusterCheckError, match="parameters learning_rate: .*dropped"):
        tune(cluster)


@pytest.mark.parametrize("modes", [["ReadWriteOnce"], ["ReadWriteOncePod"], ["ReadOnlyMany"]])
def test_a_data_claim_that_is_not_read_write_many_is_refused(modes: list[str]) -> None:
    text = refused(Cluster(claims={"hpt-data": modes}), f"access modes {modes[0]}; parallel")
    assert "use a ReadWriteMany claim" in text


def test_a_read_write_once_claim_on_a_single_node_cluster_is_accepted() -> None:
    cluster, lines = ready(Cluster(claims={"hpt-data": ["ReadWriteOnce"]}, gpus=[1])), []
    tune(cluster, lines)
    assert "data_pvc=hpt-data: ReadWriteOnce on a single-node cluster: accepted" in lines[2]
    assert created(cluster)  # the Experiment ran


@pytest.mark.parametrize(
    ("modes", "forbidden"), [(["ReadWriteOncePod"], ()), (["ReadWriteOnce"], ("nodes",))]
)
def test_one_node_accepts_no_other_mode_and_unreadable_nodes_accept_none(modes, forbidden) -> None:
    cluster = Cluster(claims={"hpt-data": modes}, gpus=[1], forbidden=forbidden)
    text = refused(cluster, f"access modes {modes[0]}; parallel")
    assert "ReadWriteOnce is accepted on a single-node cluster whose nodes" in text


def test_a_missing_data_claim_is_refused() -> None:
    refused(Cluster(claims={}), "no PersistentVolumeClaim hpt-data in namespace team; create it")


def test_a_namespace_that_is_not_a_profile_is_refused() -> None:
    labels = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}  # the old README setup
    text = refused(Cluster(labels=labels), "namespace team: not a Kubeflow profile")
    assert "Katib's NetworkPolicy admits trial metrics only from profile namespaces" in text
    assert "create a Profile for team" in text


def test_a_profile_without_katibs_collector_label_is_refused() -> None:
    labels = {k: v for k, v in PROFILE_LABELS.items() if "katib" not in k}
    refused(
        Cluster(labels=labels),
        "kubectl label namespace team katib.kubeflow.org/metrics-collector-injection=enabled",
    )


RESTRICTED_NOTE = (
    "namespace team: PSS restricted (pod-security.kubernetes.io/enforce=restricted): Katib's "
    "injected metrics collector passes only where ConfigMap kubeflow/katib-config sets "
    "init.controller.injectSecurityContext: true (else every trial pod is refused)"
)


def test_a_profile_an_admin_set_to_pss_restricted_is_told_what_katib_needs() -> None:
    """1.11's profiles enforce baseline; restricted also polices Katib's injected collector."""
    baseline, lines = ready(Cluster()), []
    tune(baseline, lines)
    assert not any("PSS" in line for line in lines)
    labels = {**PROFILE_LABELS, "pod-security.kubernetes.io/enforce": "restricted"}
    restricted, lines = ready(Cluster(labels=labels)), []
    tune(restricted, lines)
    assert RESTRICTED_NOTE in lines


def test_katibs_own_namespace_is_accepted() -> None:
    labels = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
    cluster = ready(Cluster(namespace="kubeflow", labels=labels))
    tune(cluster, namespace="kubeflow")
    assert len(created(cluster)) == 1


def test_gpus_no_node_offers_are_refused() -> None:
    gpu_pools = pools(accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2)
    text = refused(
        Cluster(gpus=[0, 1]),
        "trial_accelerator_count=2: no node offers 2",
        **study(worker_pool_specs=gpu_pools),
    )
    assert "set trial_accelerator_count: 0 to train on CPU" in text
    cluster = ready(Cluster(gpus=[0, 2]))
    tune(cluster, **study(worker_pool_specs=gpu_pools))
    assert len(created(cluster)) == 1


def test_what_the_account_may_not_read_is_said_and_not_checked() -> None:
    gpu_pools = pools(accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1)
    cluster, lines = ready(Cluster(forbidden=("namespaces", "nodes"), gpus=[0])), []
    tune(cluster, lines, **study(worker_pool_specs=gpu_pools))
    assert "namespace team: not readable by this service account, not checked (Forbidden)" in lines
    assert "nodes: not readable by this service account, not checked (Forbidden)" in lines


def test_a_data_path_only_kfps_pods_see_is_refused() -> None:
    minio = pools(args=["--data=/minio/mlpipeline/v2/artifacts/prepared", "--epochs=4"])
    text = refused(
        Cluster(),
        r"--data=/minio/mlpipeline/.*: only this pod sees it",
        **study(worker_pool_specs=minio),
        pvc_name="",
    )
    assert "set data_pvc to a ReadWriteMany PersistentVolumeClaim" in text


def test_a_data_path_under_the_mount_path_with_no_claim_mounted_is_refused() -> None:
    """/mnt/hpt is only shared when a claim is mounted there; without one it is the pod's."""
    mounted = pools(args=["--data=/mnt/hpt/prepared", "--epochs=4"])
    text = refused(
        ready(Cluster()),  # were it accepted, the study would finish at once
        r"--data=/mnt/hpt/prepared: only this pod sees it",
        **study(worker_pool_specs=mounted),
        pvc_name="",
    )
    assert "set data_pvc" in text


def test_the_train_step_checks_the_cluster_before_creating_the_tfjob() -> None:
    cluster = Cluster(tfjob_api=False)
    with pytest.raises(ClusterCheckError, match="serves no TFJob API"):
        call_with_request(
            final_job.run_final_job,
            final_job.FinalJobRequest,
            dict(
                worker_pool_specs=final_pools(gpus=0),
                base_output_directory="/mnt/hpt/runs/r1/final",
                display_name="hpt",
                namespace="team",
                cpu="2",
                memory="8Gi",
                data_pvc="hpt-data",
                api=cluster.custom,
                core_api=cluster.core,
                sleep=lambda s: None,
                echo=lambda line: None,
            ),
        )
    assert created(cluster) == []
    with pytest.raises(ClusterCheckError, match="base_output_directory=/tmp/out: only this pod"):
        call_with_request(
            final_job.run_final_job,
            final_job.FinalJobRequest,
            dict(
                worker_pool_specs=final_pools(gpus=0),
                base_output_directory="/tmp/out",
                display_name="hpt",
                namespace="team",
                cpu="2",
                memory="8Gi",
                data_pvc="hpt-data",
                api=Cluster().custom,
                core_api=Cluster().core,
                sleep=lambda s: None,
                echo=lambda line: None,
            ),
        )


# --------------------------------------------------------------------------- resume


def finished_study() -> Cluster:
    cluster = ready(Cluster())
    tune(cluster)
    return cluster


def test_resume_waits_for_katibs_restart_before_trusting_the_status() -> None:
    cluster = finished_study()
    restarting = {"conditions": [{"type": "Restarting", "status": "True"}], "trials": 8}
    running = {"conditions": [{"type": "Running", "status": "True"}], "trials": 10}
    # The first read finds the finished study; after the patch, two more reads still show it.
    cluster.statuses = [SUCCEEDED_8, restarting, running, {**SUCCEEDED, "trials": 12}]
    cluster.restart_after = 3
    cluster.calls.clear()
    lines: list[str] = []
    done, _ = tune(cluster, lines, max_trial_count=12)
    assert done["status"]["trials"] == 12  # not the stale Succeeded with 8 trials
    (patch,) = [c for c in cluster.calls if c[0] == "PATCH"]
    reads = [c for c in cluster.calls if c[0] == "GET" and "/experiments/" in c[1]]
    after = [c for c in cluster.calls[cluster.calls.index(patch) :] if c in reads]
    assert len(after) == 2 + 1 + 1 + 1  # two stale, Restarting (the wait ends), Running, Succeeded
    name = next(iter(cluster.objects))[1]
    assert f"Experiment team/{name}: resuming with maxTrialCount 8 → 12" in lines
    assert lines.index(f"Experiment team/{name}: restarted by Katib") > lines.index(
        f"Experiment team/{name}: resuming with maxTrialCount 8 → 12"
    )


def test_a_restart_katib_never_makes_is_a_one_line_timeout() -> None:
    cluster = finished_study()
    cluster.restart_after = 10**6
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    args = component_args(Path("/nonexistent"))
    for key in ("trials", "data_pvc", "data_mount_path"):
        args.pop(key)
    args.update(max_trial_count=12, pvc_name="hpt-data", data_mount_path="/mnt/hpt")
    with pytest.raises(KubeflowJobError, match=r"patched, but Katib has not restarted it .* 600s"):
        args.update(
            api=cluster.custom,
            core_api=cluster.core,
            poll_s=30,
            clock=lambda: now[0],
            sleep=sleep,
            echo=lambda line: None,
        )
        call_with_request(katib_tune.run_katib_study, katib_tune.StudyRequest, args)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (dict(parallel_trial_count=4), "maxTrialCount above its 8 trials"),
        (dict(max_failed_trial_count=3), "maxTrialCount above its 8 trials"),
    ],
)
def test_edits_the_webhook_would_refuse_are_not_sent_and_said(
    change: dict[str, int], why: str
) -> None:
    cluster = finished_study()
    cluster.calls.clear()
    lines: list[str] = []
    tune(cluster, lines, **change)
    assert not [c for c in cluster.calls if c[0] == "PATCH"]
    (line,) = [x for x in lines if "not applied" in x]
    assert why in line and "keeping it as it is" in line


def test_a_study_that_ended_on_its_goal_is_not_restarted() -> None:
    cluster = finished_study()
    goal = copy.deepcopy(SUCCEEDED_8)
    goal["conditions"][-1]["reason"] = "ExperimentGoalReached"
    cluster.statuses = [goal]
    for obj in cluster.objects.values():
        obj["status"] = goal
    lines: list[str] = []
    tune(cluster, lines, max_trial_count=12)
    (line,) = [x for x in lines if "not applied" in x]
    assert "it is Succeeded (ExperimentGoalReached)" in line


def test_the_dry_run_is_held_to_the_real_client() -> None:
    cluster = Cluster()
    with pytest.raises(TypeError, match="unexpected keyword"):
        cluster.custom.create_namespaced_custom_object(
            "kubeflow.org", "v1beta1", "team", "experiments", {}, dryrun="All"
        )
    assert cluster_checks.flag_value(pools(), "data") == "/mnt/hpt/data/prepared"


def test_a_per_run_experiment_keeps_no_pvc_and_is_not_restarted() -> None:
    cluster = ready(Cluster())
    tune(cluster, resumable=False)
    (stored,) = cluster.objects.values()
    assert stored["spec"]["resumePolicy"] == "Never"  # Katib keeps no suggestion PVC for it
    lines: list[str] = []
    tune(cluster, lines, resumable=False, max_trial_count=12)
    (line,) = [x for x in lines if "not applied" in x]
    assert "resumePolicy FromVolume or LongRunning" in line and "resumePolicy Never" in line
