"""The pipeline, written once: `build_pipeline(target, settings)`.

prepare_dataset → features (a frozen backbone's outputs, once) → build trial job spec → tune →
select_best_trial → build final job spec → train_final → evaluate → (if it passes) register.

The targets differ in what executes the same payloads (`pipelines/wiring/`):
`vertex` binds tune, train and register to an HPT job sent with GCPC's launcher,
CustomTrainingJobOp and ModelUploadOp; `kubeflow` to a Katib Experiment, a TFJob
and a KFP Model; `local` to the local executors.
"""

import inspect
from typing import Any

from kfp import dsl

from components import base
from components.evaluate import evaluate_model
from components.features import features_job_spec
from components.job_specs import final_job_spec, trial_job_spec
from components.prepare_dataset import prepare_dataset
from components.select_best_trial import select_best_trial
from components.study_metric import study_metric
from pipelines.settings import Settings, SettingsError
from pipelines.settings_space import listed_objectives, settings_model, study_space
from pipelines.study.model_choice import models_of
from pipelines.wiring import binding_for
from trainer.contract import FIXED_TRAINER_SETTINGS

PIPELINE_DESCRIPTION = (
    "Prepare an image dataset, tune a distributed TensorFlow model (MirroredStrategy trials), "
    "retrain the best configuration with MultiWorkerMirroredStrategy, evaluate and register it."
)


def build_pipeline(target: str, settings: Settings) -> Any:
    """The pipeline for `target` (local, vertex, kubeflow), parameter defaults from `settings`.

    Raises:
        ValueError: Unknown target.
        SearchSpaceError: A bad search space (before anything is compiled or run).
    """
    binding = binding_for(target)
    known = settings_model(settings)
    space = study_space(settings, known)
    binding.check_space(space)
    s = settings
    # A model choice (`model_choice`): unset weights stay unset, each model's own default.
    weights_default = s.weights or ("" if models_of(space) else known.spec.default_weights)

    parameters = space.to_study_spec_parameters()
    labels_default = dict(s.labels)
    objectives_default, constraints_default = listed_objectives(s), list(s.constraints)
    if s.data_pvc and target != "kubeflow":
        raise SettingsError(
            f"data_pvc={s.data_pvc}: a PersistentVolumeClaim is for the kubeflow target; "
            f"unset it for {target}"
        )
    shared_root_default = s.data_mount_path if s.data_pvc else ""
    continued_default = _continued_trials(s)

    def op(component: Any) -> Any:
        return base.with_image(component, s.components_image)

    def hpt_pipeline(
        source: str = s.source,
        image_size: int = s.image_size,
        validation_fraction: float = s.validation_fraction,
        test_fraction: float = s.test_fraction,
        seed: int = s.seed,
        max_bad_fraction: float = s.max_bad_fraction,
        study_spec_parameters: list = parameters,
        metric_tag: str = s.metric_tag,
        objectives: list = objectives_default,
        constraints: list = constraints_default,
        max_trial_count: int = s.max_trials,
        parallel_trial_count: int = s.parallel_trials,
        max_failed_trial_count: int = s.max_failed_trials,
        algorithm: str = s.algorithm,
        measurement_selection: str = s.measurement_selection,
        early_stopping: bool = s.early_stopping,
        trial_threshold: float = s.trial_threshold or 0.0,
        use_trial_threshold: bool = s.trial_threshold is not None,
        model: str = s.model,
        weights: str = weights_default,
        epochs: int = s.epochs,
        batch_size: int = s.batch_size,
        precision: str = s.precision,
        feature_cache: str = s.feature_cache,
        features_dir: str = "",
        workers: int = s.workers,
        trial_machine_type: str = s.trial_machine_type,
        trial_accelerator_type: str = s.trial_accelerator_type,
        trial_accelerator_count: int = s.trial_accelerator_count,
        final_machine_type: str = s.final_machine_type,
        final_accelerator_type: str = s.final_accelerator_type,
        final_accelerator_count: int = s.final_accelerator_count,
        trainer_image: str = s.trainer_image,
        eval_threshold: float = s.eval_threshold or 0.0,
        use_eval_threshold: bool = s.eval_threshold is not None,
        model_display_name: str = s.model_display_name,
        parent_model: str = s.parent_model or "",
        study_display_name: str = f"{s.display_name}-study",
        final_display_name: str = f"{s.display_name}-final",
        location: str = s.region,
        service_account: str = s.service_account or "",
        network: str = s.network or "",
        encryption_spec_key_name: str = s.kms_key or "",
        labels: dict = labels_default,
        continued_trials: list = continued_default,
        study_dir: str = "",
        registry_dir: str = s.registry,
        shared_root: str = shared_root_default,
    ):
        p = _Params(locals())
        data = op(prepare_dataset)(
            source=source,
            image_size=image_size,
            validation_fraction=validation_fraction,
            test_fraction=test_fraction,
            seed=seed,
            shared_root=shared_root,
            max_bad_fraction=max_bad_fraction,
        ).set_display_name("Prepare dataset")
        data.set_caching_options(False)  # reads the source (a folder or bucket that may change)
        binding.mount_data(data, s)
        dataset = data.outputs["dataset"]
        features_spec = op(features_job_spec)(
            dataset=dataset,
            trainer_image=trainer_image,
            model=model,
            weights=weights,
            batch_size=batch_size,
            precision=precision,
            seed=seed,
            study_spec_parameters=study_spec_parameters,
            feature_cache=feature_cache,
            features_dir=features_dir,
            machine_type=trial_machine_type,
            accelerator_type=trial_accelerator_type,
            accelerator_count=trial_accelerator_count,
            shared_root=shared_root,
        ).set_display_name("Build features job spec")
        features = binding.features(op, p, s, features_spec) if binding.features else None
        trial_spec = op(trial_job_spec)(
            dataset=dataset,
            trainer_image=trainer_image,
            **p.fixed_trainer_settings(),
            machine_type=trial_machine_type,
            accelerator_type=trial_accelerator_type,
            accelerator_count=trial_accelerator_count,
            study_dir=study_dir,
            shared_root=shared_root,
            expect_gpus=binding.expects_gpus,
            features=features,
        ).set_display_name("Build trial job spec")
        metric = op(study_metric)(
            metric_tag=metric_tag, objectives=objectives, constraints=constraints
        ).set_display_name("Study metric")
        p.study_spec_metrics = metric.outputs["study_spec_metrics"]  # the objectives decide
        trials = binding.tune(op, p, s, dataset, trial_spec)
        best = op(select_best_trial)(
            trials=trials,
            study_spec_metrics=metric.outputs["study_spec_metrics"],
            constraints=constraints,
            threshold=trial_threshold,
            use_threshold=use_trial_threshold,
            continued_trials=continued_trials,
        ).set_display_name("Select best trial")
        final_spec = op(final_job_spec)(
            dataset=dataset,
            best_parameters=best.outputs["best_parameters"],
            trainer_image=trainer_image,
            **p.fixed_trainer_settings(),
            machine_type=final_machine_type,
            accelerator_type=final_accelerator_type,
            accelerator_count=final_accelerator_count,
            worker_count=workers,
            shared_root=shared_root,
            expect_gpus=binding.expects_gpus,
            features=features,
        ).set_display_name("Build final job spec")
        trained, model_uri = binding.train_final(op, p, s, final_spec)
        evaluation = op(evaluate_model)(
            model=trained,
            dataset=dataset,
            threshold=eval_threshold,
            use_threshold=use_eval_threshold,
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

    _hide_parameters(hpt_pipeline, binding.hidden_parameters)
    return dsl.pipeline(name=s.display_name, description=PIPELINE_DESCRIPTION)(hpt_pipeline)


def _continued_trials(settings: Settings) -> list[dict[str, Any]]:
    """The earlier run's trials the study continues from (`continue_from`), checked; or []."""
    from pipelines.study.continuation import ContinuationError
    from pipelines.targets import earlier_runs

    try:
        found = earlier_runs.continued(settings)
    except ContinuationError as err:
        raise SettingsError(str(err)) from None
    return found.trials if found else []


def _hide_parameters(func: Any, hidden: frozenset[str]) -> None:
    """Leave parameters a target never reads out of its spec (they keep their defaults).

    kfp reads the signature and calls the function with one channel per parameter, in
    order, so only trailing parameters can be hidden.
    """
    params = list(inspect.signature(func).parameters.values())
    kept = [p for p in params if p.name not in hidden]
    if params[: len(kept)] != kept:
        raise ValueError(f"hidden parameters {sorted(hidden)} must come last in the pipeline")
    func.__signature__ = inspect.Signature(kept)


class _Params:
    """Attribute access to the pipeline's parameter channels inside the DSL function."""

    study_spec_metrics: Any  # set in the DSL function: the study-metric step's output

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)

    def fixed_trainer_settings(self) -> dict[str, Any]:
        """The channels of the contract's `FIXED_TRAINER_SETTINGS`, for the job-spec steps."""
        return {name: self.__dict__[name] for name in FIXED_TRAINER_SETTINGS}
