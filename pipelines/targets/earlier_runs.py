"""The run a study continues (`continue_from`): recognised offline, read, checked, before any work.

`continue_from` names one of:

* a local run folder (an `--output`: its newest run's trials artifact, else its study's
  trials), a local study folder, or a trials JSON file in Vertex's `Trial` schema;
* `projects/P/locations/L/hyperparameterTuningJobs/ID` (a Vertex HPT job) or
  `projects/P/locations/L/pipelineJobs/ID` (a Vertex pipeline run: the HPT job its tune
  step ran), read through aiplatform with the environment's credentials;
* a Kubeflow Pipelines run id (a UUID): the Katib Experiment its tune step ran
  (`pipelines.targets.kubeflow.run_trials`), read with the kubeconfig's credentials.

`continued(settings)` reads it and applies `pipelines.study.continuation`'s rules for the
settings' study; the result is cached per process, so the CLI's check and the pipeline's
build read a cloud source once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pipelines.models import KnownModel
from pipelines.settings import Settings
from pipelines.settings_space import settings_model, study_space
from pipelines.study import continuation
from pipelines.study import trials as trials_lib
from pipelines.study.continuation import ContinuationError, Continued, Earlier, Objective
from pipelines.study.search_space import GOAL_NUMBERS, SearchSpace
from trainer.contract import FIXED_TRAINER_SETTINGS

HPT_JOB = re.compile(r"^projects/[^/]+/locations/[^/]+/hyperparameterTuningJobs/[^/]+$")
PIPELINE_JOB = re.compile(r"^projects/[^/]+/locations/[^/]+/pipelineJobs/[^/]+$")
KUBEFLOW_RUN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
EXPECTED = (
    "a local run folder, a trials JSON file (Vertex's Trial schema), "
    "projects/P/locations/L/hyperparameterTuningJobs/ID, projects/P/locations/L/pipelineJobs/ID "
    "or a Kubeflow run id"
)
_STUDY_FILE = "study.json"  # the local study's summary (`local_study.STUDY_FILE`)
_IDENTITY_FILE = "identity.json"  # what the local study ran with (`study_identity.IDENTITY_FILE`)
_GOAL_NAMES = {number: name for name, number in GOAL_NUMBERS.items()}


def kind_of(source: str) -> str:
    """`local`, `vertex-hpt`, `vertex-pipeline` or `kubeflow` (offline; nothing is read).

    Raises:
        ContinuationError: None of `EXPECTED`, or a local path that does not exist.
    """
    if HPT_JOB.match(source):
        return "vertex-hpt"
    if PIPELINE_JOB.match(source):
        return "vertex-pipeline"
    if KUBEFLOW_RUN.match(source):
        return "kubeflow"
    if "://" not in source and not source.startswith("projects/") and Path(source).exists():
        return "local"
    raise ContinuationError(f"continue_from={source}: expected {EXPECTED}")


def objectives(settings: Settings) -> list[Objective]:
    """Today's (metric, goal) pairs, from the settings (the one place that reads them)."""
    from pipelines.study.objectives import resolve

    metrics, _ = resolve(settings.study.objectives, (), settings.study.metric_tag)
    return [(m.metric_id, m.goal) for m in metrics]


def defaults(settings: Settings, known: KnownModel | None = None) -> dict[str, Any]:
    """The value each tunable flag takes when a trial does not tune it (`known`: the model)."""
    spec = (known or settings_model(settings)).spec
    values: dict[str, Any] = {name: h.default for name, h in spec.all_hyperparameters().items()}
    for name in FIXED_TRAINER_SETTINGS:  # a fixed setting is passed to every trial
        if name in values and settings.value(name) is not None:
            values[name] = settings.value(name)
    return values


def _spec_objectives(study_json: Path) -> list[Objective] | None:
    if not study_json.is_file():
        return None
    metrics = json.loads(study_json.read_text()).get("studySpec", {}).get("metrics", [])
    return [(m["metric_id"], _GOAL_NAMES.get(int(m["goal"]), str(m["goal"]))) for m in metrics]


def _spec_budget(study_json: Path | None) -> dict[str, Any] | None:
    """What a local study's trials ran with (`continuation.BUDGET_KEYS`), from its identity.json.

    None when the study records none (a trials file, a study from before identities).
    """
    identity = study_json.parent / _IDENTITY_FILE if study_json else None
    if identity is None or not identity.is_file():
        return None
    recorded = {"trial_workers": 0, **json.loads(identity.read_text())}  # one-machine trials before
    return {key: recorded.get(key) for key in continuation.BUDGET_KEYS}


def budget(
    settings: Settings, dataset: str | None, space: SearchSpace | None = None
) -> dict[str, Any]:
    """Today's `continuation.BUDGET_KEYS`: `dataset` is its fingerprint (None: not compared).

    `epochs` is None when the search space (`space`: the settings') tunes it: each trial
    then carries its own.
    """
    space = space or study_space(settings)
    tuned = any(p.parameter_id == "epochs" for p in space.all_parameters())
    return {
        "dataset": dataset,
        "image_size": settings.data.image_size,
        "epochs": None if tuned else settings.value("epochs"),
        "trial_workers": settings.value("trial_workers"),
    }


def _local_trials(path: Path) -> tuple[Path, Path | None]:
    """(trials file, study.json or None) of a local run folder, study folder or file."""
    from pipelines.lineage.graph import TRIALS_OUTPUT
    from pipelines.lineage.local import find_output, is_run_dir, run_dirs

    if path.is_file():
        return path, None
    if (path / trials_lib.TRIALS_FILE).is_file():  # a study folder
        return path / trials_lib.TRIALS_FILE, path / _STUDY_FILE
    runs = [path] if is_run_dir(path) else run_dirs(path)
    for run in reversed(runs):  # newest first
        found = find_output(run, TRIALS_OUTPUT)
        if found and Path(found.get("uri", "")).is_file():
            output = run.parent.parent if run.parent.name == "artifacts" else path
            recorded = found.get("metadata", {}).get("study")  # the run's own, never moved
            study = Path(recorded) if recorded else output / "study"
            return Path(found["uri"]), study / _STUDY_FILE
    study = path / "study"
    if (study / trials_lib.TRIALS_FILE).is_file():
        return study / trials_lib.TRIALS_FILE, study / _STUDY_FILE
    raise ContinuationError(f"continue_from={path}: no trials found there (did its tuning run?)")


def _read_file(path: Path, source: str) -> list[dict[str, Any]]:
    try:
        trials = trials_lib.read_trials(str(path))
        for trial in trials:
            trials_lib.validate_trial(trial)  # Vertex's Trial schema, strictly
    except trials_lib.TrialsError as err:
        raise ContinuationError(f"continue_from={source}: {err}") from None
    return trials


def read(
    source: str,
    credentials: Any = None,
    *,
    space: SearchSpace | None = None,
    namespace: str = "kubeflow",
    kube_api: Any = None,
) -> Earlier:
    """The earlier run's trials and objectives, as recorded (before the rules).

    Args:
        source: `continue_from`.
        credentials: google-auth credentials for a Vertex source (None: the environment's).
        space: Today's search space (a Kubeflow run's Katib Trials are read in it).
        namespace: A Kubeflow run's namespace.
        kube_api: A `CustomObjectsApi` for a Kubeflow run (None: the kubeconfig's).

    Raises:
        ContinuationError: Not found, unreadable, or a source that cannot be read yet; one line.
    """
    kind = kind_of(source)
    label = continuation.label_of(source)
    if kind == "local":
        path = Path(source).resolve()  # recorded with the trials: lineage reads it anywhere
        trials_file, study_json = _local_trials(path)
        found = _spec_objectives(study_json) if study_json else None
        trials = _read_file(trials_file, source)
        label = continuation.label_of(str(path))
        return Earlier(str(path), label, trials, found, _spec_budget(study_json))
    if kind == "kubeflow":
        from pipelines.targets.kubeflow import run_trials
        from pipelines.targets.kubeflow.katib_trials import KatibTrialError

        if space is None:
            raise ContinuationError(f"continue_from={source}: a Kubeflow run is read in a space")
        try:
            fetched, found = run_trials.read_run(source, namespace, space, kube_api)
        except KatibTrialError as err:
            raise ContinuationError(f"continue_from={source}: {err}") from None
        return Earlier(source, label[:8], fetched, found)
    from pipelines.targets.vertex import trials as vertex_trials

    try:
        job = source
        if kind == "vertex-pipeline":
            job = vertex_trials.hpt_job_of_pipeline(source, credentials)
        fetched, found = vertex_trials.fetch_study(job, credentials)
    except ValueError as err:
        raise ContinuationError(f"continue_from={source}: {err}") from None
    return Earlier(source, label, [trials_lib.normalize_trial(t) for t in fetched], found)


_CACHE: dict[str, Earlier] = {}


def continued(
    settings: Settings,
    known: KnownModel | None = None,
    space: SearchSpace | None = None,
    credentials: Any = None,
    *,
    dataset: str | None = None,
) -> Continued | None:
    """The earlier trials fit for the settings' study, with one note per rule applied.

    None when `settings.continue_from` is unset. A cloud source is read once per process.
    `known` and `space`: the settings' model and search space, as the run's plan resolved
    them (None: derived here). `dataset`: today's dataset fingerprint, compared with the
    earlier run's (None: not).

    Raises:
        ContinuationError: Unreadable, other objectives, a removed parameter, another
            budget (data, image size, fewer epochs); one line.
    """
    source = settings.study.continue_from
    if not source:
        return None
    space = space or study_space(settings, known)
    if source not in _CACHE or kind_of(source) == "local":  # a local run may have grown since
        _CACHE[source] = read(
            source, credentials, space=space, namespace=settings.kubeflow.kubeflow_namespace
        )
    return continuation.reconcile(
        _CACHE[source],
        space,
        objectives(settings),
        defaults(settings, known),
        budget=budget(settings, dataset, space),
        selection=settings.study.measurement_selection,
    )


def target_line(settings: Settings, target: str, found: Continued) -> str:
    """What continuing means on `target` (the one line said at compile and submit)."""
    n = len(found.trials)
    if target == "local":
        return (
            f"continue_from: the local study starts from {n} earlier trial(s) and proposes none "
            f"of their configurations again; max_trials={settings.study.max_trials} counts its "
            "own trials"
        )
    service = "Vertex (Vizier)" if target == "vertex" else "Katib"
    return (
        f"continue_from: {service} cannot seed a study: the {n} earlier trial(s) are not re-run; "
        f"the new study runs its max_trials={settings.study.max_trials} as usual and the selection "
        "step chooses over both"
    )
