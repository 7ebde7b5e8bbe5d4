"""The pipeline, written once: `build_pipeline(target, plan)`.

prepare_dataset → features (a frozen backbone's outputs, once) → build trial job spec → tune →
select_best_trial → build final job spec → train_final → evaluate → (if it passes) register.

The targets differ in what executes the same payloads (each `pipelines/targets/<target>/wiring.py`):
`vertex` binds tune, train and register to an HPT job sent with GCPC's launcher,
CustomTrainingJobOp and ModelUploadOp; `kubeflow` to a Katib Experiment, a TFJob
and a KFP Model; `local` to the local executors.
"""

from __future__ import annotations

from typing import Any

from kfp import dsl

from components import base
from components.evaluate import evaluate_model
from components.features import features_job_spec
from components.job_specs import final_job_spec, trial_job_spec
from components.prepare_dataset import prepare_dataset
from components.prepare_fanout import finish_dataset, plan_dataset, prepare_group
from components.select_best_trial import select_best_trial
from components.study_metric import study_metric
from pipelines.pipeline_parameters import parameter_defaults, signature
from pipelines.plan import RunPlan, resolve
from pipelines.settings import Settings, SettingsError
from pipelines.wiring import TARGETS, binding_for
from trainer.contract import FIXED_TRAINER_SETTINGS

PIPELINE_DESCRIPTION = (
    "Prepare an image dataset, tune a distributed TensorFlow model (MirroredStrategy trials), "
    "retrain the best configuration with MultiWorkerMirroredStrategy, evaluate and register it."
)


def build_pipeline(target: str, plan: RunPlan | Settings) -> Any:
    """The pipeline for `target` (local, vertex, kubeflow), parameter defaults from `plan`.

    Settings given instead are resolved here (`pipelines.plan.resolve`).

    Raises:
        ValueError: Unknown target.
        SearchSpaceError: A bad search space (before anything is compiled or run).
        SettingsError: A setting the target cannot honour.
    """
    binding = binding_for(target)
    plan = plan if isinstance(plan, RunPlan) else resolve(plan)
    s = plan.settings
    defaults = parameter_defaults(s, _derived_defaults(plan, target, binding))

    shown = [name for name in defaults if name not in binding.hidden_parameters]

    def hpt_pipeline(*channels: Any) -> None:
        # kfp passes one channel per parameter in the signature; hidden ones keep their default.
        _dag(binding, s, _Params({**defaults, **dict(zip(shown, channels, strict=True))}))

    hpt_pipeline.__signature__ = signature(  # type: ignore[attr-defined]
        {name: defaults[name] for name in shown}
    )
    return dsl.pipeline(name=s.cloud.display_name, description=PIPELINE_DESCRIPTION)(hpt_pipeline)


def _derived_defaults(plan: RunPlan, target: str, binding: Any) -> dict[str, Any]:
    """The defaults of the parameters that do not carry a setting as it is."""
    s = plan.settings
    binding.check_space(plan.space)
    for other in TARGETS.values():  # a setting only another target reads is refused
        for name, why in other.exclusive.items():
            if other.name != target and (value := s.value(name)):
                raise SettingsError(f"{name}={value}: {why}; unset it for {target}")
    if not binding.tracks and (s.results.tracking == "mlflow" or s.results.tracking_uri):
        asked = s.results.tracking_uri or s.results.tracking
        name = "tracking_uri" if s.results.tracking_uri else "tracking"
        raise SettingsError(
            f"{name}={asked}: the {target} target writes no MLflow runs yet; "
            "use tracking=auto or off and no tracking_uri"
        )
    return {
        "study_spec_parameters": plan.space.to_study_spec_parameters(),
        "objectives": list(plan.objectives),
        "trial_threshold": s.study.trial_threshold or 0.0,
        "use_trial_threshold": s.study.trial_threshold is not None,
        # A model choice (`model_choice`): unset weights stay unset, each model's own default.
        "weights": s.architecture.weights
        or ("" if plan.models else plan.known.spec.default_weights),
        "features_dir": "",
        "eval_threshold": s.training.eval_threshold or 0.0,
        "use_eval_threshold": s.training.eval_threshold is not None,
        "study_display_name": f"{s.cloud.display_name}-study",
        "final_display_name": f"{s.cloud.display_name}-final",
        "continued_trials": plan.continued.trials if plan.continued else [],
        "study_dir": "",
        "dataset_dir": "",  # set by the local run: a folder keyed by the source and settings
        "shared_root": binding.shared_root(s),  # e.g. the Kubeflow data PVC mount path
    }


def _dag(binding: Any, s: Settings, p: _Params) -> None:
    """The steps, wired to the parameter channels `p` (inside the kfp pipeline context)."""

    def op(component: Any) -> Any:
        return base.with_image(component, s.images.components_image)

    dataset = _prepared_dataset(binding, s, p, op)
    features = _features(binding, s, p, op, dataset)
    trial_spec = op(trial_job_spec)(
        dataset=dataset,
        trainer_image=p.trainer_image,
        **p.fixed_trainer_settings(),
        machine_type=p.trial_machine_type,
        accelerator_type=p.trial_accelerator_type,
        accelerator_count=p.trial_accelerator_count,
        worker_count=p.trial_workers,
        study_dir=p.study_dir,
        shared_root=p.shared_root,
        study_spec_parameters=p.study_spec_parameters,
        expect_gpus=binding.expects_gpus,
        features=features,
    ).set_display_name("Build trial job spec")
    metric = op(study_metric)(
        metric_tag=p.metric_tag,
        objectives=p.objectives,
        constraints=p.constraints,
        measurement_selection=p.measurement_selection,
    ).set_display_name("Study metric")
    p.study_spec_metrics = metric.outputs["study_spec_metrics"]  # the objectives decide
    p.study_measurement_selection = metric.outputs["measurement_selection"]  # and this
    trials = binding.tune(op, p, s, dataset, trial_spec)
    best = op(select_best_trial)(
        trials=trials,
        dataset=dataset,
        study_spec_metrics=metric.outputs["study_spec_metrics"],
        constraints=p.constraints,
        threshold=p.trial_threshold,
        use_threshold=p.use_trial_threshold,
        continued_trials=p.continued_trials,
    ).set_display_name("Select best trial")
    _train_evaluate_register(binding, s, p, op, dataset, features, trials, best)


def _prepared_dataset(binding: Any, s: Settings, p: _Params, op: Any) -> Any:
    """The prepare step (never cached: it reads a folder or bucket that may change); its output.

    Where the target fans out (`Binding.fans_out`) and `prepare_workers` > 1: a plan step, a
    `dsl.ParallelFor` over its groups of shard tasks (at most `prepare_workers` at once) and a
    finish step given every group's files (`dsl.Collected`).
    """
    inputs = dict(
        source=p.source,
        image_size=p.image_size,
        validation_fraction=p.validation_fraction,
        test_fraction=p.test_fraction,
        seed=p.seed,
        shared_root=p.shared_root,
        max_bad_fraction=p.max_bad_fraction,
        record_format=p.record_format,
        prepare_workers=p.prepare_workers,
    )
    if not (binding.fans_out and s.data.prepare_workers > 1):
        data = op(prepare_dataset)(**inputs, dataset_dir=p.dataset_dir)
        data.set_display_name("Prepare dataset")
        data.set_caching_options(False)  # reads the source (a folder or bucket that may change)
        binding.mount_data(data, s)
        return data.outputs["dataset"]
    planned = op(plan_dataset)(**inputs).set_display_name("Plan dataset shards")
    planned.set_caching_options(False)  # lists the source
    binding.mount_data(planned, s)
    with dsl.ParallelFor(
        planned.outputs["Output"], parallelism=s.data.prepare_workers, name="shard-groups"
    ) as files:
        group = op(prepare_group)(planned=planned.outputs["planned"], files=files)
        group.set_display_name("Write shard group").set_caching_options(False)
        binding.mount_data(group, s)
    finished = op(finish_dataset)(
        planned=planned.outputs["planned"], written=dsl.Collected(group.outputs["Output"])
    ).set_display_name("Prepare dataset")
    finished.set_caching_options(False)
    binding.mount_data(finished, s)
    return finished.outputs["dataset"]


def _features(binding: Any, s: Settings, p: _Params, op: Any, dataset: Any) -> Any:
    """The features job spec and, where the target has one, the features step's output."""
    features_spec = op(features_job_spec)(
        dataset=dataset,
        trainer_image=p.trainer_image,
        model=p.model,
        weights=p.weights,
        batch_size=p.batch_size,
        precision=p.precision,
        seed=p.seed,
        study_spec_parameters=p.study_spec_parameters,
        feature_cache=p.feature_cache,
        features_dir=p.features_dir,
        machine_type=p.trial_machine_type,
        accelerator_type=p.trial_accelerator_type,
        accelerator_count=p.trial_accelerator_count,
        shared_root=p.shared_root,
    ).set_display_name("Build features job spec")
    return binding.features(op, p, s, features_spec) if binding.features else None


def _train_evaluate_register(
    binding: Any,
    s: Settings,
    p: _Params,
    op: Any,
    dataset: Any,
    features: Any,
    trials: Any,
    best: Any,
) -> None:
    """The final job from the best parameters, its evaluation and, if it passes, register."""
    final_spec = op(final_job_spec)(
        dataset=dataset,
        best_parameters=best.outputs["best_parameters"],
        trainer_image=p.trainer_image,
        **p.fixed_trainer_settings(),
        machine_type=p.final_machine_type,
        accelerator_type=p.final_accelerator_type,
        accelerator_count=p.final_accelerator_count,
        worker_count=p.workers,
        shared_root=p.shared_root,
        expect_gpus=binding.expects_gpus,
        features=features,
    ).set_display_name("Build final job spec")
    trained, model_uri = binding.train_final(op, p, s, final_spec)
    evaluation = op(evaluate_model)(
        model=trained,
        dataset=dataset,
        threshold=p.eval_threshold,
        use_threshold=p.use_eval_threshold,
        trials=trials,  # the study's MLflow run, which the final job's joins
        best_trial_id=best.outputs["best_trial_id"],
    ).set_display_name("Evaluate on the test split")
    binding.mount_data(evaluation, s)
    with dsl.If(evaluation.outputs["Output"] == True, name="model-passes-threshold"):  # noqa: E712
        binding.register(
            op,
            p,
            s,
            model=trained,
            model_uri=model_uri,
            evaluation=evaluation.outputs["metrics"],
            trials=trials,
            dataset=dataset,
            best_trial_id=best.outputs["best_trial_id"],
        )


class _Params:
    """Attribute access to the pipeline's parameter channels inside the DSL function."""

    study_spec_metrics: Any  # set in the DSL function: the study-metric step's outputs
    study_measurement_selection: Any

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # only for a name that is no parameter
        raise AttributeError(f"no pipeline parameter {name}")

    def fixed_trainer_settings(self) -> dict[str, Any]:
        """The channels of the contract's `FIXED_TRAINER_SETTINGS`, for the job-spec steps."""
        return {name: self.__dict__[name] for name in FIXED_TRAINER_SETTINGS}
