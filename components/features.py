"""The features step's job spec: which frozen prefixes to cache, and the job that computes them.

Shared by every target, as the trial and final job specs are: the plan
(`pipelines/study/feature_plan.py`) from the model, the study's parameters and
`feature_cache`, and a one-replica `worker_pool_specs` on the trial machine type running
`python -m trainer.features`. Each target's features step (`features_<target>.py`)
executes the pools, or does nothing when they are empty.
"""

from typing import NamedTuple

from kfp import dsl

from components.base import component


@component
def features_job_spec(
    dataset: dsl.Input[dsl.Dataset],
    trainer_image: str,
    model: str,
    weights: str,
    batch_size: int,
    precision: str,
    seed: int,
    study_spec_parameters: list,
    feature_cache: str,
    features_dir: str,
    machine_type: str,
    accelerator_type: str,
    accelerator_count: int,
    shared_root: str,
    job_dir: dsl.Output[dsl.Artifact],
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "FeaturesJobSpec",
    [
        ("worker_pool_specs", list),
        ("base_output_directory", str),
        ("features_dir", str),
        ("trainable_blocks", str),
        ("reason", str),
    ],
):
    """The features job on the trial machine type, or empty pools when nothing is cached.

    The cache goes to `features_dir` when given (a stable folder lets a rerun reuse it:
    every entry is keyed), else to `<job_dir>/features`, unique to this run.
    `reason` is the plan's one line: what is cached, or why nothing is.
    """
    from collections import namedtuple

    from pipelines.jobs import trainer_args, worker_pools
    from pipelines.study import feature_plan, spec_reader

    parameters = spec_reader.parse_study_spec_parameters(study_spec_parameters)
    plan = feature_plan.plan_for_model(model, parameters, feature_cache)
    Spec = namedtuple(
        "Spec",
        [
            "worker_pool_specs",
            "base_output_directory",
            "features_dir",
            "trainable_blocks",
            "reason",
        ],
    )
    if not plan.trainable_blocks:
        return Spec([], "", "", "", plan.reason)
    base = trainer_args.shared_location(job_dir, shared_root)
    location = features_dir or f"{base.rstrip('/')}/features"
    args = trainer_args.features_args(
        trainer_args.artifact_location(dataset),
        location,
        model=model,
        weights=weights,
        precision=precision,
        batch_size=batch_size,
        seed=seed,
        trainable_blocks=plan.flag_value,
    )
    pools = worker_pools.trial_worker_pool_specs(
        image_uri=trainer_image,
        command=trainer_args.FEATURES_COMMAND,
        args=args,
        machine_type=machine_type,
        accelerator_type=accelerator_type or None,
        accelerator_count=int(accelerator_count),
    )
    worker_pools.validate_worker_pool_specs(pools)
    return Spec(pools, base, location, plan.flag_value, plan.reason)
