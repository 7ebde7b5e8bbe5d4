"""The features step's job spec: which frozen prefixes to cache, and the job that computes them.

Shared by every target, as the trial and final job specs are: the plan
(`pipelines/study/feature_plan.py`) for each model a trial can be, from the study's
parameters and `feature_cache`, and a one-replica `worker_pool_specs` on the trial machine
type with one accelerator (the entrypoint uses one device) running
`python -m trainer.features`. Each target's features step (`steps/features.py`)
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
    """The features job on the trial machine type (one accelerator), or empty pools.

    The pools are empty when nothing is cached.

    The cache goes to `features_dir` when given (a stable folder lets a rerun reuse it:
    every entry is keyed), else to `<job_dir>/features`, unique to this run.
    `reason` is the plan's one line: what is cached, or why nothing is.
    """
    from collections import namedtuple

    from pipelines.jobs import machines, trainer_args, worker_pools
    from pipelines.study import feature_plan, spec_reader

    parameters = spec_reader.parse_study_spec_parameters(study_spec_parameters)
    plans = feature_plan.plans_for_study(model, parameters, feature_cache)
    cached = [(name, plan.flag_value) for name, plan in plans if plan.trainable_blocks]
    reason = "; ".join(plan.reason for _, plan in plans)
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
    if not cached:
        return Spec([], "", "", "", reason)
    base = trainer_args.shared_location(job_dir, shared_root)
    location = features_dir or f"{base.rstrip('/')}/features"
    args = trainer_args.features_args(
        trainer_args.artifact_location(dataset),
        location,
        models=cached,
        weights=weights,
        precision=precision,
        batch_size=batch_size,
        seed=seed,
    )
    machine, count = machines.one_accelerator(
        machine_type, accelerator_type or None, int(accelerator_count)
    )
    pools = worker_pools.trial_worker_pool_specs(
        image_uri=trainer_image,
        command=trainer_args.FEATURES_COMMAND,
        args=args,
        machine_type=machine,
        accelerator_type=accelerator_type or None,
        accelerator_count=count,
    )
    worker_pools.validate_worker_pool_specs(pools)
    return Spec(pools, base, location, feature_plan.blocks_text(plans), reason)
