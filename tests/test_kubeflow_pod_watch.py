"""Fail fast: a step whose pods cannot run stops at the next poll, in one line, its object deleted.

The real `kubernetes` client reads the pods (only HTTP is faked, `fake_kube`): the pod JSON
is what the API server returns for each condition, as `kubectl get pod -o json` shows it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pipelines.targets.kubeflow import pod_watch
from pipelines.targets.kubeflow.pod_watch import PodProblem
from tests.fake_kube import Cluster
from tests.test_kubeflow_cluster import tune
from tests.test_kubeflow_trainjob import run

CREATED = "2026-11-26T05:00:00Z"
START = dt.datetime(2026, 11, 26, 5, 0, tzinfo=dt.UTC)
RUNNING_EXPERIMENT = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "ExperimentCreated"},
        {"type": "Running", "status": "True", "reason": "ExperimentRunning"},
    ],
    "trialsRunning": 3,
}
UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def pod(
    name: str,
    *,
    phase: str = "Pending",
    conditions: list[dict[str, Any]] | None = None,
    waiting: dict[str, Any] | None = None,
    restarts: int = 0,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if waiting is not None:
        status["containerStatuses"] = [
            {
                "name": "node",
                "image": "registry.example/hpt-trainer:1",
                "imageID": "",
                "ready": False,
                "restartCount": restarts,
                "state": {"waiting": waiting},
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "creationTimestamp": CREATED},
        "status": status,
    }


def unschedulable(name: str) -> dict[str, Any]:
    scheduled = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": UNSCHEDULABLE,
    }
    return pod(name, conditions=[scheduled])


def image_pull(name: str) -> dict[str, Any]:
    message = 'Back-off pulling image "registry.example/hpt-trainer:1"'
    return pod(name, waiting={"reason": "ImagePullBackOff", "message": message})


def crash_loop(name: str) -> dict[str, Any]:
    message = "back-off 40s restarting failed container=node"
    return pod(
        name,
        phase="Running",
        waiting={"reason": "CrashLoopBackOff", "message": message},
        restarts=3,
    )


def gets(cluster: Cluster, plural: str) -> int:
    return sum(1 for m, p, _ in cluster.calls if m == "GET" and f"/{plural}/" in p)


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- the steps


def test_an_unschedulable_trial_pod_stops_the_tune_step_and_deletes_the_experiment() -> None:
    cluster = Cluster(pods=[unschedulable("hpt-study-abc-trial-1-xyz")])
    cluster.statuses = [RUNNING_EXPERIMENT]
    with pytest.raises(PodProblem) as err:
        tune(cluster)
    text = one_line(err)
    assert text.startswith("pod team/hpt-study-abc-trial-1-xyz: Unschedulable (0/3 nodes")
    assert "lower kubeflow_cpu, kubeflow_memory or the accelerator counts" in text
    ((plural, name),) = cluster.deleted
    assert plural == "experiments" and text.endswith(f"Experiment team/{name} deleted")
    assert gets(cluster, "experiments") == 1  # stopped at the first poll
    (listing,) = [q for m, p, q in cluster.calls if p.endswith("/pods")]
    assert listing == {"labelSelector": f"hpt-pipeline.dev/experiment={name}"}


def test_an_image_pull_failure_stops_the_final_trainjob_and_deletes_it() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3", pods=[image_pull("hpt-final-1-node-0-1")])
    cluster.statuses = [{}]
    with pytest.raises(PodProblem) as err:
        run(cluster, [])
    text = one_line(err)
    assert "pod team/hpt-final-1-node-0-1: ImagePullBackOff for image registry.example" in text
    assert "check that trainer_image is pushed and this cluster can pull it" in text
    ((plural, name),) = cluster.deleted
    assert plural == "trainjobs" and text.endswith(f"TrainJob team/{name} deleted")
    assert gets(cluster, "trainjobs") == 1
    (listing,) = [q for m, p, q in cluster.calls if p.endswith("/pods")]
    assert listing == {"labelSelector": f"jobset.sigs.k8s.io/jobset-name={name}"}


def test_an_init_container_that_cannot_pull_its_image_stops_the_tune_step_naming_it() -> None:
    """The trainer container waits on PodInitializing; the init container is what is stuck."""
    stuck = pod("hpt-study-abc-trial-2-xyz", waiting={"reason": "PodInitializing"})
    stuck["status"]["initContainerStatuses"] = [
        {
            "name": "fetch-data",
            "image": "registry.example/fetch:3",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}},
        }
    ]
    cluster = Cluster(pods=[stuck])
    cluster.statuses = [RUNNING_EXPERIMENT]
    with pytest.raises(PodProblem) as err:
        tune(cluster)
    text = one_line(err)
    assert text.startswith(
        "pod team/hpt-study-abc-trial-2-xyz: ErrImagePull for image registry.example/fetch:3 "
        "(manifest unknown)"
    )
    assert gets(cluster, "experiments") == 1  # at the first poll, not after the grace


def test_a_crash_looping_tfjob_replica_stops_the_final_step() -> None:
    cluster = Cluster(pods=[crash_loop("hpt-final-1-worker-0")])
    cluster.statuses = [{"conditions": [{"type": "Created", "status": "True"}]}]
    with pytest.raises(PodProblem) as err:
        run(cluster, [], job_api_setting="tfjob")
    text = one_line(err)
    assert "container node CrashLoopBackOff after 3 restarts" in text
    assert "kubectl logs -n team hpt-final-1-worker-0 -c node --previous" in text
    ((plural, _),) = cluster.deleted
    assert plural == "tfjobs"


def test_a_pod_pending_past_the_grace_period_stops_the_step() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.1", pods=[pod("j-node-0-0")])
    cluster.statuses = [{}]
    later = START + dt.timedelta(seconds=700)
    with pytest.raises(PodProblem, match=r"Pending for 700s, longer than kubeflow_pending_grace_s"):
        run(cluster, [], pending_grace_s=600, now=lambda: later)
    assert len(cluster.deleted) == 1


def test_pods_starting_within_the_grace_period_let_the_job_finish() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3", pods=[pod("j-node-0-0")])
    complete = {"type": "Complete", "status": "True", "reason": "JobSetCompleted"}
    cluster.statuses = [{}, {}, {"conditions": [complete]}]
    soon = START + dt.timedelta(seconds=60)
    done = run(cluster, [], pending_grace_s=600, now=lambda: soon)
    assert done["status"]["conditions"] == [complete]
    assert cluster.deleted == []


def test_pods_the_account_may_not_list_are_said_once_and_not_watched() -> None:
    cluster = Cluster(tfjob_api=False, trainer="2.3", forbidden=("pods",))
    complete = {"type": "Complete", "status": "True", "reason": "JobSetCompleted"}
    cluster.statuses = [{}, {}, {"conditions": [complete]}]
    lines: list[str] = []
    run(cluster, lines)
    said = [line for line in lines if "not watched" in line]
    assert said == ["pods in team: not readable by this service account, not watched"]


# --------------------------------------------------------------------------- one pod


def read(obj: dict[str, Any]) -> Any:
    """A pod JSON as the client's model."""
    from kubernetes import client

    class Answer:
        data = __import__("json").dumps(obj)

    return client.ApiClient().deserialize(Answer(), "V1Pod")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod("a", phase="Running"), None),
        (pod("a"), None),  # Pending, within the grace period
        (unschedulable("a"), "Unschedulable"),
        (image_pull("a"), "ImagePullBackOff"),
        (pod("a", waiting={"reason": "ErrImagePull", "message": "not found"}), "ErrImagePull"),
        (crash_loop("a"), "CrashLoopBackOff"),
        (pod("a", waiting={"reason": "ContainerCreating"}), None),
        (
            pod("a", waiting={"reason": "CreateContainerConfigError", "message": 'secret "s"'}),
            "a Secret or ConfigMap it names is missing",
        ),
    ],
)
def test_each_pod_state(obj: dict[str, Any], expected: str | None) -> None:
    found = pod_watch.pod_problem(read(obj), START + dt.timedelta(seconds=30), 600)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found and "\n" not in found


# --------------------------------------------------------------------------- each line, exactly

AT = START + dt.timedelta(seconds=30)


def scheduled(status: str, reason: str | None) -> dict[str, Any]:
    return pod("a", conditions=[{"type": "PodScheduled", "status": status, "reason": reason}])


@pytest.mark.parametrize(
    "obj",
    [
        scheduled("True", None),  # scheduled: nothing to say
        scheduled("True", "Unschedulable"),  # a stale reason on a scheduled pod
        scheduled("False", "SchedulingGated"),  # waiting on a gate, not refused by the scheduler
        pod("a", phase="Running", waiting=None),
    ],
)
def test_only_an_unschedulable_verdict_is_one(obj: dict[str, Any]) -> None:
    assert pod_watch.pod_problem(read(obj), AT, 600) is None


def test_each_reason_names_its_remedy_in_full() -> None:
    lines = {
        name: pod_watch.pod_problem(read(obj), AT, 600)
        for name, obj in (
            ("unschedulable", unschedulable("a")),
            ("pull", image_pull("a")),
            ("config", pod("a", waiting={"reason": "CreateContainerConfigError", "message": "m"})),
        )
    }
    assert lines == {
        "unschedulable": f"pod team/a: Unschedulable ({UNSCHEDULABLE}): no node has what it "
        "requests; lower kubeflow_cpu, kubeflow_memory or the accelerator counts, or add nodes "
        "that offer them",
        "pull": "pod team/a: ImagePullBackOff for image registry.example/hpt-trainer:1 (Back-off "
        'pulling image "registry.example/hpt-trainer:1"): check that trainer_image is pushed and '
        "this cluster can pull it (registry access, an imagePullSecret on the service account)",
        "config": "pod team/a: CreateContainerConfigError (m): a Secret or ConfigMap it names is "
        "missing",
    }
    late = pod_watch.pod_problem(read(pod("a")), START + dt.timedelta(seconds=601), 600)
    assert late == (
        "pod team/a: Pending for 601s, longer than kubeflow_pending_grace_s=600: see `kubectl "
        "describe pod -n team a`; raise kubeflow_pending_grace_s if pulls or volumes are slow here"
    )


def test_the_grace_period_is_for_pending_pods_and_ends_after_it() -> None:
    at_grace = START + dt.timedelta(seconds=600)
    assert pod_watch.pod_problem(read(pod("a")), at_grace, 600) is None  # not past it yet
    old_running = read(pod("a", phase="Running"))
    assert pod_watch.pod_problem(old_running, START + dt.timedelta(days=2), 600) is None


def test_every_container_is_read_not_only_up_to_a_running_one() -> None:
    obj = crash_loop("a")
    running = {**obj["status"]["containerStatuses"][0], "name": "sidecar", "state": {}}
    no_state = {k: v for k, v in running.items() if k != "state"} | {"name": "init"}
    obj["status"]["containerStatuses"] = [no_state, running, *obj["status"]["containerStatuses"]]
    found = pod_watch.pod_problem(read(obj), AT, 600)
    assert found is not None and "container node CrashLoopBackOff after 3 restarts" in found


def test_long_messages_are_cut_to_one_short_line() -> None:
    assert pod_watch._short(None) == ""
    assert pod_watch._short(" a\n  b ") == "a b"
    assert pod_watch._short("x" * 240) == "x" * 240
    cut = pod_watch._short("x" * 241)
    assert cut == "x" * 239 + "…" and len(cut) == 240


def test_the_clock_is_aware_utc_as_the_pods_timestamps_are() -> None:
    now = pod_watch._utcnow()
    assert now.utcoffset() == dt.timedelta(0)
    assert (now - START).total_seconds() > 0  # a naive clock could not be compared


def test_the_watcher_calls_the_progress_callback_first_and_works_without_one() -> None:
    cluster = Cluster()
    seen: list[dict[str, Any]] = []
    pod_watch.watcher(cluster.core, "team", "x=y", grace_s=600, then=seen.append)({"a": 1})
    assert seen == [{"a": 1}]
    pod_watch.watcher(cluster.core, "team", "x=y", grace_s=600)({"a": 2})  # no callback: fine
