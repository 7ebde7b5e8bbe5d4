"""Build the trainer's `worker_pool_specs` at run time (they need the dataset's location).

The same components feed every target: Vertex's HPT / custom-job ops, Katib and the
TFJob on Kubeflow, and the local executors receive exactly these payloads.

The fixed trainer settings (`model` … `seed`, `trainer.contract.FIXED_TRAINER_SETTINGS`) are
spelled out in both signatures because kfp builds a component's inputs from its signature
and hands each input by name; the bodies pick them out by the contract's list, and
`tests/test_pipeline_spec.py` checks both signatures against it.
"""

from typing import NamedTuple

from kfp import dsl

from components.base import component


@component
def trial_job_spec(
    dataset: dsl.Input[dsl.Dataset],
    trainer_image: str,
    model: str,
    weights: str,
    epochs: int,
    batch_size: int,
    metric_tag: str,
    precision: str,
    seed: int,
    machine_type: str,
    accelerator_type: str,
    accelerator_count: int,
    worker_count: int,
    study_dir: str,
    shared_root: str,
    study_spec_parameters: list,
    study: dsl.Output[dsl.Artifact],
    expect_gpus: bool = False,
    features: dsl.Input[dsl.Artifact] | None = None,
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "TrialJobSpec", [("worker_pool_specs", list), ("base_output_directory", str)]
):
    """Worker pools of every HPT trial: a chief and `worker_count` workers (`trial_workers`).

    Built by the final job's builder (HPT appends the tuned flags to each pool's args).
    A fixed setting the study tunes for every trial (a top-level parameter of
    `study_spec_parameters`, e.g. `epochs`) is left out of the fixed flags, so the
    trial's command line has it once; a conditional one (given to some trials) stays.
    `expect_gpus` (cloud targets) tells the trainer to expect the pool's GPUs.
    The study's `base_output_directory` is `study_dir` when given (locally, a
    stable folder lets a rerun resume the study), else a unique folder under the
    pipeline root reserved by the `study` artifact. The `features` step's
    cache, when it computed one, is passed as `--features`.
    """
    from collections import namedtuple

    from pipelines.jobs import trainer_args, worker_pools
    from pipelines.study.spec_reader import parse_study_spec_parameters

    tuned = [p.parameter_id for p in parse_study_spec_parameters(study_spec_parameters)]
    args = trainer_args.trainer_args(dataset, trainer_args.fixed_settings(locals()), tuned)
    pools = worker_pools.training_worker_pool_specs(
        image_uri=trainer_image,
        command=trainer_args.TRAINER_COMMAND,
        args=args + trainer_args.features_flag(features),
        machine_type=machine_type,
        accelerator_type=accelerator_type or None,
        accelerator_count=int(accelerator_count),
        worker_count=int(worker_count),
        expect_gpus=expect_gpus,
    )
    worker_pools.validate_worker_pool_specs(pools)
    TrialJobSpec = namedtuple("TrialJobSpec", ["worker_pool_specs", "base_output_directory"])
    return TrialJobSpec(pools, study_dir or trainer_args.shared_location(study, shared_root))


@component
def final_job_spec(
    dataset: dsl.Input[dsl.Dataset],
    best_parameters: dict,
    trainer_image: str,
    model: str,
    weights: str,
    epochs: int,
    batch_size: int,
    metric_tag: str,
    precision: str,
    seed: int,
    machine_type: str,
    accelerator_type: str,
    accelerator_count: int,
    worker_count: int,
    shared_root: str,
    job_dir: dsl.Output[dsl.Artifact],
    expect_gpus: bool = False,
    features: dsl.Input[dsl.Artifact] | None = None,
) -> NamedTuple(  # type: ignore[valid-type]  # kfp reads the call form
    "FinalJobSpec", [("worker_pool_specs", list), ("base_output_directory", str)]
):
    """Chief + workers running the trainer with the best trial's parameters.

    A fixed setting among them (a tuned `epochs`) is left out of the fixed flags: the
    command line has the picked value once.

    `job_dir` reserves a unique folder under the pipeline root (or under
    `shared_root`, a volume every pod mounts) for the job's outputs
    (`AIP_MODEL_DIR` = `<base_output_directory>/model/`). The `features` step's
    cache, when it computed one, is passed as `--features`.
    """
    from collections import namedtuple

    from pipelines.jobs import trainer_args, worker_pools

    fixed = trainer_args.fixed_settings(locals())
    args = trainer_args.trainer_args(dataset, fixed, tuned=best_parameters)
    args += trainer_args.features_flag(features)
    pools = worker_pools.training_worker_pool_specs(
        image_uri=trainer_image,
        command=trainer_args.TRAINER_COMMAND,
        args=args + trainer_args.parameter_args(best_parameters),
        machine_type=machine_type,
        accelerator_type=accelerator_type or None,
        accelerator_count=int(accelerator_count),
        worker_count=int(worker_count),
        expect_gpus=expect_gpus,
    )
    worker_pools.validate_worker_pool_specs(pools)
    job_dir.metadata.update({"best_parameters": best_parameters, "replicas": 1 + int(worker_count)})
    FinalJobSpec = namedtuple("FinalJobSpec", ["worker_pool_specs", "base_output_directory"])
    return FinalJobSpec(pools, trainer_args.shared_location(job_dir, shared_root))
