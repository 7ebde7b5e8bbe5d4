"""Run the study as a Katib Experiment: create (or resume) it, wait with progress, read its Trials.

`run_katib_study` is what the `tune_on_katib` component does, with the Kubernetes API
injectable so tests replace the API calls, never this logic. The Experiment's name follows
from the study folder, so a retried task or a rerun finds it; it is reused when its spec
matches but the trial counts, which are patched. A cancelled run's SIGTERM deletes it, and a
rerun then starts afresh. Katib's rules behind this: docs/kubeflow.md, "Katib, as its source
behaves".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.targets.kubeflow import (
    cluster_checks,
    job_kind,
    kube,
    pod_watch,
    trainjob,
    trainjob_checks,
)
from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.kubeflow.katib_rules import check_experiment
from pipelines.targets.kubeflow.katib_trials import metric_strategies, to_vertex_trials
from pipelines.targets.kubeflow.trial_template import TrialPods
from pipelines.targets.kubeflow.waiting import (
    KubeflowJobError,
    last_true_condition,
    wait_for,
    wait_until,
)

DEFAULT_TIMEOUT_S = 7 * 24 * 3600
DEFAULT_POLL_S = 30.0
WHERE = dict(group=katib.GROUP, version=katib.VERSION, plural=katib.EXPERIMENTS)
_DONE = ("trialsSucceeded", "trialsFailed", "trialsKilled", "trialsEarlyStopped")
FINISHED = ("Succeeded", "Failed")
MAX_TRIALS_REACHED = "ExperimentMaxTrialsReached"  # status_util.go, the only restartable end
RESTARTABLE = ("FromVolume", "LongRunning")  # resume policies a finished Experiment restarts with
RESTART_TIMEOUT_S = 600.0  # Katib reconciles a patched Experiment within seconds


def progress_line(obj: Mapping[str, Any]) -> str:
    """`Experiment ns/name: Running, 3/10 trials done (2 succeeded, 1 failed), 2 running; best …`.

    "Done" counts as Katib's `completedTrialsCount` does (`status_util.go` l.189-190).
    """
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    cond = last_true_condition(obj)
    done = sum(int(status.get(k) or 0) for k in (*_DONE, "trialMetricsUnavailable"))
    parts = [
        f"{int(status.get(k) or 0)} {label}"
        for k, label in (
            ("trialsSucceeded", "succeeded"),
            ("trialsEarlyStopped", "early stopped"),
            ("trialsFailed", "failed"),
            ("trialMetricsUnavailable", "without metric"),
            ("trialsKilled", "killed"),
        )
        if status.get(k)
    ]
    line = (
        f"Experiment {meta.get('namespace')}/{meta.get('name')}: "
        f"{cond.get('type') if cond else 'Pending'}, {done}/{spec.get('maxTrialCount', '?')} "
        f"trials done ({', '.join(parts) or 'none yet'}), "
        f"{int(status.get('trialsRunning') or 0)} running"
    )
    best = status.get("currentOptimalTrial") or {}
    objective = (spec.get("objective") or {}).get("objectiveMetricName")
    strategies = metric_strategies(obj)
    for metric in (best.get("observation") or {}).get("metrics") or []:
        if metric.get("name") == objective:
            line += f"; best {objective}={metric.get(strategies.get(objective, 'latest'))}"
    return line


def _not_applied(found: Mapping[str, Any], final_max: int) -> str:
    """Why Katib's webhook would refuse the edit (`validator.go` l.118-141), or ""."""
    trials = int((found.get("status") or {}).get("trials") or 0)
    cond = last_true_condition(found) or {}
    kind, reason = cond.get("type"), cond.get("reason")
    policy = (found.get("spec") or {}).get("resumePolicy")
    if final_max <= trials:
        return f"Katib takes an edit only with maxTrialCount above its {trials} trials"
    if kind in FINISHED and not (
        kind == "Succeeded" and reason == MAX_TRIALS_REACHED and policy in RESTARTABLE
    ):
        return (
            f"Katib restarts a finished Experiment only when it Succeeded on its trial budget "
            f"with resumePolicy {' or '.join(RESTARTABLE)} (it is {kind} ({reason}), "
            f"resumePolicy {policy})"
        )
    return ""


def _resume(api: Any, found: dict[str, Any], body: Mapping[str, Any], echo: Any) -> bool:
    """Wait on an existing Experiment, patching its trial counts; True if Katib must restart it.

    A finished Experiment restarts asynchronously (`experiment_controller.go`: the next
    reconcile marks it Restarting), so a caller that patched one must not trust the next
    read. An edit the webhook would refuse (any edit needs `maxTrialCount` above the trials
    run; a finished one restarts only from Succeeded on its trial budget with FromVolume or
    LongRunning) is not sent: the line names the values not applied and why.
    """
    meta = found["metadata"]
    ours = body["metadata"]["annotations"][katib.SPEC_HASH_ANNOTATION]
    theirs = (meta.get("annotations") or {}).get(katib.SPEC_HASH_ANNOTATION)
    where = f"Experiment {meta['namespace']}/{meta['name']}"
    if theirs != ours:
        raise KubeflowJobError(
            f"{where} exists with another spec (digest {str(theirs)[:12]}, this run "
            f"{ours[:12]}): delete it (`kubectl delete experiment -n {meta['namespace']} "
            f"{meta['name']}`) or use another study folder"
        )
    changes = {
        k: body["spec"][k] for k in katib.EDITABLE if found["spec"].get(k) != body["spec"].get(k)
    }
    if not changes:
        echo(f"{where}: exists, waiting on it")
        return False
    shown = ", ".join(f"{k} {found['spec'].get(k)} → {v}" for k, v in changes.items())
    why = _not_applied(found, int(changes.get("maxTrialCount", found["spec"]["maxTrialCount"])))
    if why:
        echo(f"{where}: not applied ({shown}): {why}; keeping it as it is")
        return False
    echo(f"{where}: resuming with {shown}")
    api.patch_namespaced_custom_object(
        WHERE["group"],
        WHERE["version"],
        meta["namespace"],
        WHERE["plural"],
        meta["name"],
        {"spec": changes},
    )
    return (last_true_condition(found) or {}).get("type") in FINISHED


def _restarted(before: Mapping[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Whether Katib has acted on the patch: no longer finished, or more trials than before."""
    trials = int((before.get("status") or {}).get("trials") or 0)

    def done(obj: dict[str, Any]) -> bool:
        kind = (last_true_condition(obj) or {}).get("type")
        return kind not in FINISHED or int((obj.get("status") or {}).get("trials") or 0) > trials

    return done


@dataclasses.dataclass(frozen=True)
class StudyRequest:
    """What the tune step asks for: the study payload, its trial pods, where and how long.

    Attributes:
        study_spec_parameters: The study payload, as for Vertex (`study_inputs`).
        study_spec_metrics: Idem.
        study_spec_algorithm: Idem (Vertex's names).
        study_spec_measurement_selection_type: Idem.
        max_trial_count: Idem.
        parallel_trial_count: Idem.
        max_failed_trial_count: Idem.
        worker_pool_specs: The trial's one pool.
        base_output_directory: The study folder (names the Experiment; trials' AIP_* dirs).
        namespace: Where the Experiment runs.
        display_name: Start of the Experiment's name.
        cpu: Each trial pod's CPU request and limit.
        memory: Each trial pod's memory request and limit.
        experiment_name: Overrides the derived name.
        service_account: The trial pods' service account ("" for the default).
        pvc_name: A PVC mounted in every trial pod ("" for none).
        data_mount_path: Where it is mounted.
        early_stopping: Katib's median stopping rule.
        resumable: A later run may resume it (the user named the study folder): resume
            policy FromVolume; else Never (no PVC kept per run).
        timeout_s: Longest wait.
        poll_s: Seconds between status reads (None: `DEFAULT_POLL_S`).
        job_api_setting: `kubeflow_job_api`; the final job's API is checked before the study.
        pending_grace_s: How long a trial pod may stay Pending (`pod_watch`).
        trial_nodes: Pods per trial (`trial_workers` + 1): more than one makes each trial a
            TrainJob, and the final job one too (`job_kind`).
        spot_label: The spot pool's node label for the trial pods, or "" (`spot`).
    """

    study_spec_parameters: Sequence[Mapping[str, Any] | str]
    study_spec_metrics: Sequence[Mapping[str, Any] | str]
    study_spec_algorithm: str
    study_spec_measurement_selection_type: str
    max_trial_count: int
    parallel_trial_count: int
    max_failed_trial_count: int
    worker_pool_specs: Sequence[Mapping[str, Any] | str]
    base_output_directory: str
    namespace: str
    display_name: str
    cpu: str
    memory: str
    experiment_name: str = ""
    service_account: str = ""
    pvc_name: str = ""
    data_mount_path: str = ""
    early_stopping: bool = False
    resumable: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    poll_s: float | None = None
    job_api_setting: str = "tfjob"
    pending_grace_s: float = 600.0
    trial_nodes: int = 1
    spot_label: str = ""

    def study(self) -> katib.StudyPayload:
        """The study payload the Experiment is built from."""
        return katib.StudyPayload(
            study_spec_parameters=self.study_spec_parameters,
            study_spec_metrics=self.study_spec_metrics,
            study_spec_algorithm=self.study_spec_algorithm,
            study_spec_measurement_selection_type=self.study_spec_measurement_selection_type,
            max_trial_count=self.max_trial_count,
            parallel_trial_count=self.parallel_trial_count,
            max_failed_trial_count=self.max_failed_trial_count,
            early_stopping=self.early_stopping,
        )

    def pods(self) -> TrialPods:
        """Each trial's pods."""
        return TrialPods(
            worker_pool_specs=self.worker_pool_specs,
            cpu=self.cpu,
            memory=self.memory,
            base_output_directory=self.base_output_directory,
            service_account=self.service_account,
            pvc_name=self.pvc_name,
            data_mount_path=self.data_mount_path,
            nodes=int(self.trial_nodes),
            spot_label=self.spot_label,
        )


def refuse_budgets(max_study_hours: float, max_trials_no_progress: int) -> None:
    """Refuse a study budget in one line: a Katib Experiment has neither (not modelled here).

    Raises:
        ValueError: Naming the budgets that are set.
    """
    budgets = {"max_study_hours": max_study_hours, "max_trials_no_progress": max_trials_no_progress}
    if set_ := [f"{k}={v:g}" for k, v in budgets.items() if v]:
        raise ValueError(
            f"{', '.join(set_)}: a Katib Experiment has no study budget (only maxTrialCount "
            "and maxFailedTrialCount); unset it on the kubeflow target"
        )


def run_katib_study(
    request: StudyRequest,
    *,
    api: Any = None,
    core_api: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], Any] | None = None,
    echo: Callable[[str], None] = print,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Create (or resume) the Experiment, wait until it ends, and return it with its trials.

    Args:
        request: The study and its trials (`StudyRequest`).
        api: A `CustomObjectsApi`; default `kube.custom_objects_api()`.
        core_api: A `CoreV1Api` for the cluster checks; default `kube.core_v1_api()`.
        clock: Monotonic clock (tests).
        sleep: Sleep (tests).
        now: Wall-clock UTC time for pod ages (tests; default: now).
        echo: Where progress lines go.

    Returns:
        (the finished Experiment, its Trials as Vertex Trial JSON).

    Raises:
        KubeflowJobError: Not created, failed (Katib's reason) or timed out; one line.
        KatibSpecError, KatibRuleError: A study Katib cannot run or would refuse.
        JobKindError: Multi-node trials with `kubeflow_job_api: tfjob`.
        ClusterCheckError: The cluster cannot run it (`cluster_checks`), before anything starts.
        SystemExit: SIGTERM (the run cancelled): the Experiment was deleted; status 143.
    """
    r = request
    setting = job_kind.job_api_setting(r.job_api_setting, r.trial_nodes)  # before any call
    name = r.experiment_name or katib.experiment_name(
        r.display_name, r.base_output_directory, int(r.trial_nodes)
    )
    resume = katib.RESUME_POLICY if r.resumable else katib.PER_RUN_POLICY
    body = _experiment(r, name, resume, echo, notes=True)  # refused before any call
    api = api if api is not None else kube.custom_objects_api()
    core_api = core_api if core_api is not None else kube.core_v1_api()
    field = _check_cluster(r, api, core_api, setting, echo)
    if field is not None:  # TrainJob trials: the override goes in the served field
        body = _experiment(r, name, resume, echo, field)
    admitted = cluster_checks.dry_run_experiment(api, body, **WHERE)
    if admitted is not None:
        cluster_checks.check_log_scales(body, admitted)
    timing = dict(
        timeout_s=r.timeout_s, poll_s=r.poll_s or DEFAULT_POLL_S, clock=clock, sleep=sleep
    )
    done = _run(api, core_api, body, r.pending_grace_s, timing, now, echo)
    return done, _read_trials(api, r, name, done, echo)


def _check_cluster(
    r: StudyRequest, api: Any, core_api: Any, setting: str, echo: Callable[[str], None]
) -> str | None:
    """Refuse a study the cluster cannot run; for TrainJob trials, the served override field."""
    cluster_checks.check_pods_can_run(
        core_api,
        api,
        namespace=r.namespace,
        worker_pool_specs=r.worker_pool_specs,
        pvc_name=r.pvc_name,
        data_mount_path=r.data_mount_path,
        gpu_setting="trial_accelerator_count",
        job_api_setting=setting,  # the final job's API: refused before the study
        echo=echo,
    )
    if job_kind.trial_kind(r.trial_nodes) != job_kind.TRAINJOB:
        return None
    field = trainjob_checks.trainjob_override_field(api)
    trainjob_checks.check_runtime(api, echo)
    trainjob_checks.check_katib_runs_trainjobs(core_api, echo)
    return field


def _read_trials(
    api: Any, r: StudyRequest, name: str, done: dict[str, Any], echo: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The finished Experiment's Trials, as Vertex Trial JSON."""
    listed = api.list_namespaced_custom_object(
        katib.GROUP,
        katib.VERSION,
        r.namespace,
        katib.TRIALS,
        label_selector=f"{katib.EXPERIMENT_LABEL}={name}",
    )
    trials = to_vertex_trials(listed.get("items") or [], r.study().space(), metric_strategies(done))
    echo(f"Experiment {r.namespace}/{name}: {len(trials)} trials read")
    return trials


def _experiment(
    r: StudyRequest,
    name: str,
    resume_policy: str,
    echo: Callable[[str], None],
    override_field: str = trainjob.PATCHES,
    notes: bool = False,
) -> dict[str, Any]:
    """The Experiment, checked against Katib's admission rules; `notes` says what Katib skips."""
    body = katib.build_experiment(
        name=name,
        namespace=r.namespace,
        study=r.study(),
        pods=r.pods(),
        resume_policy=resume_policy,
        override_field=override_field,
    )
    check_experiment(body)
    if notes:
        for note in katib.objective_notes([m.metric_id for m in r.study().space().metrics]):
            echo(note)
    return body


def _run(
    api: Any,
    core_api: Any,
    body: dict[str, Any],
    pending_grace_s: float,
    timing: dict[str, Any],
    now: Callable[[], Any] | None,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """Create or resume the Experiment and wait until it ends, watching its trial pods."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    with kube.deleted_on_sigterm(api, **WHERE, namespace=namespace, name=name, echo=echo):
        found, created, restarting = _create_or_resume(api, body, echo)

        def get() -> dict[str, Any]:
            return api.get_namespaced_custom_object(  # type: ignore[no-any-return]
                WHERE["group"], WHERE["version"], namespace, WHERE["plural"], name
            )

        if restarting:  # the first reads after the patch still show the finished study
            wait_until(
                get,
                _restarted(found),
                what="was patched, but Katib has not restarted it (is katib-controller running?)",
                **{**timing, "timeout_s": min(timing["timeout_s"], RESTART_TIMEOUT_S)},
            )
            echo(f"Experiment {namespace}/{name}: restarted by Katib")
        watch = pod_watch.watcher(
            core_api,
            namespace,
            f"{katib.EXPERIMENT_POD_LABEL}={name}",
            grace_s=pending_grace_s,
            then=_progress(echo),
            echo=echo,
            **({"now": now} if now is not None else {}),
        )
        try:
            return wait_for(get, on_status=watch, **timing)
        except pod_watch.PodProblem as err:
            kube.delete_custom_object(api, **WHERE, namespace=namespace, name=name, echo=echo)
            raise pod_watch.PodProblem(f"{err}; Experiment {namespace}/{name} deleted") from None
        except KubeflowJobError as err:
            if created:
                raise
            raise KubeflowJobError(
                f"{err} (the Experiment existed before this task: `kubectl delete experiment -n "
                f"{namespace} {name}` to start afresh)"
            ) from None


def _create_or_resume(
    api: Any, body: dict[str, Any], echo: Callable[[str], None]
) -> tuple[dict[str, Any], bool, bool]:
    """Create the Experiment, or resume the one there: (it, created, restarting)."""
    from kubernetes.client import ApiException

    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    restarting, found = False, None
    try:
        found, created = kube.create_or_get(api, body=body, **WHERE)
        if created:
            echo(f"Experiment {namespace}/{name}: created")
        else:
            cluster_checks.check_log_scales(body, found)
            restarting = _resume(api, found, body, echo)
    except ApiException as err:
        what = "not created" if found is None else "not resumed"
        raise KubeflowJobError(
            f"Experiment {namespace}/{name}: {what} ({kube.api_error_line(err)})"
        ) from None
    return found, created, restarting


def _progress(echo: Callable[[str], None]) -> Callable[[dict[str, Any]], None]:
    """An `on_status` callback echoing `progress_line` when it changes."""
    last: list[str] = []

    def on_status(obj: dict[str, Any]) -> None:
        line = progress_line(obj)
        if not last or last[-1] != line:
            last.append(line)
            echo(line)

    return on_status
