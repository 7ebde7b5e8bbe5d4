"""The features step, pipeline side: the plan, its job spec, each target's step, the wiring."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pipelines.compiler import compile_pipeline
from pipelines.jobs import features_artifact, trainer_args
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.study import feature_plan
from pipelines.study.search_space import from_dict
from tests.test_pipeline_spec import for_target
from trainer.models import MODELS


def space(*parameters: dict) -> tuple:
    return from_dict({"parameters": list(parameters)}).parameters


LR = {"id": "learning_rate", "type": "double", "min": 0.001, "max": 0.1, "scale": "log"}


# --- the plan: search space → trainable_blocks values cached -----------------------------


def test_discrete_values_cache_every_frozen_prefix_but_not_the_whole_network():
    params = space(LR, {"id": "trainable_blocks", "type": "discrete", "values": [0, 2, 5]})
    plan = feature_plan.plan_features(MODELS["resnet50"], params, "auto")
    assert plan.trainable_blocks == (0, 2)
    assert plan.flag_value == "0,2"
    assert "trainable_blocks 5 train from images" in plan.reason


def test_an_integer_range_is_capped_at_the_deepest_frozen_prefixes():
    params = space({"id": "trainable_blocks", "type": "integer", "min": 1, "max": 13})
    plan = feature_plan.plan_features(MODELS["mobilenet_v3_small"], params, "auto")
    assert plan.trainable_blocks == (1, 2, 3)  # MAX_CACHED_DEPTHS smallest: most frozen
    assert len(plan.trainable_blocks) == feature_plan.MAX_CACHED_DEPTHS
    assert "at most 3 depths" in plan.reason and "4,5," in plan.reason


def test_a_conditional_trainable_blocks_is_found_under_its_parent():
    params = space(
        {
            "id": "optimizer",
            "type": "categorical",
            "values": ["adam", "sgd"],
            "conditional": [
                {
                    "id": "trainable_blocks",
                    "type": "discrete",
                    "values": [0, 5],
                    "parent_values": ["sgd"],
                }
            ],
        }
    )
    assert feature_plan.plan_features(MODELS["resnet50"], params, "auto").trainable_blocks == (0,)


@pytest.mark.parametrize(
    ("model", "params", "cache", "why"),
    [
        ("resnet50", space(LR), "auto", "every trial trains all 5 blocks"),  # default: all
        (
            "resnet50",
            space({"id": "trainable_blocks", "type": "discrete", "values": [0]}),
            "off",
            "feature_cache=off",
        ),
        ("cnn", space(LR), "auto", "cnn declares no frozen backbone blocks"),
        ("team.models:build", space(LR), "auto", "a team's builder declares no"),
    ],
)
def test_nothing_is_cached_and_the_plan_says_why(model, params, cache, why):
    plan = feature_plan.plan_for_model(model, params, cache)
    assert plan.trainable_blocks == ()
    assert why in plan.reason


def test_the_models_declare_their_block_boundaries():
    assert MODELS["resnet50"].blocks == 5
    assert MODELS["mobilenet_v3_small"].blocks == 13
    assert MODELS["cnn"].blocks == 0


# --- the setting ----------------------------------------------------------------------------


def test_feature_cache_setting_from_env_and_flag_and_a_bad_value_refused():
    assert Settings().training.feature_cache == "auto"
    assert load_settings(environ={"HPT_FEATURE_CACHE": "off"}).training.feature_cache == "off"
    flagged = load_settings(
        environ={"HPT_FEATURE_CACHE": "off"}, overrides={"feature_cache": "auto"}
    )
    assert flagged.training.feature_cache == "auto"
    with pytest.raises(SettingsError, match=r"feature_cache.*'sometimes'.*one of auto, off"):
        Settings(feature_cache="sometimes")


def test_feature_cache_from_yaml(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("feature_cache: off\n")
    assert load_settings(config=config, environ={}).training.feature_cache == "off"


# --- the job spec and the flags -------------------------------------------------------------


def _spec(model: str, parameters: tuple, cache: str = "auto", features_dir: str = ""):
    from components.features import features_job_spec
    from pipelines.study.search_space import SearchSpace

    dataset = SimpleNamespace(uri="/r/prepare-dataset/dataset", path="/r/prepare-dataset/dataset")
    job_dir = SimpleNamespace(
        uri="/r/features-job-spec/job_dir", path="/r/fjs/job_dir", metadata={}
    )
    return features_job_spec.python_func(
        dataset=dataset,
        trainer_image="img:1",
        model=model,
        weights="/w/resnet.weights.h5",
        batch_size=16.0,
        precision="float32",
        seed=7.0,
        study_spec_parameters=SearchSpace(parameters=parameters).to_study_spec_parameters(),
        feature_cache=cache,
        features_dir=features_dir,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2.0,
        shared_root="",
        job_dir=job_dir,
    )


def test_the_features_job_runs_the_entrypoint_on_the_trial_machine():
    params = space(LR, {"id": "trainable_blocks", "type": "discrete", "values": [0, 2, 5]})
    pools, base, location, blocks, reason = _spec("resnet50", params, features_dir="/runs/f")
    assert (location, blocks, base) == ("/runs/f", "0,2", "/r/fjs/job_dir")
    assert "caching resnet50" in reason
    (pool,) = pools
    assert pool["replica_count"] == 1
    assert pool["machine_spec"]["machine_type"] == "n1-standard-8"
    assert pool["machine_spec"]["accelerator_count"] == 1  # it uses one: a trial's 2 were billed
    assert pool["container_spec"]["command"] == ["python", "-m", "trainer.features"]
    assert pool["container_spec"]["args"] == [
        "--data=/r/prepare-dataset/dataset",
        "--output=/runs/f",
        "--model=resnet50",
        "--weights=/w/resnet.weights.h5",
        "--precision=float32",
        "--trainable_blocks=0,2",
        "--batch_size=16",
        "--seed=7",  # a random backbone (`--weights none`) is the trials' own
    ]
    # Without a stable folder, the cache goes under the task's own job folder.
    assert _spec("resnet50", params)[2] == "/r/fjs/job_dir/features"


def test_a_model_choice_caches_each_backbone_the_study_can_pick():
    """Issue 51, case 19: `--search-space backbones` with the default `--model cnn`."""
    from pipelines.study.search_space import load_search_space

    params = load_search_space("backbones").parameters
    pools, _, location, blocks, reason = _spec("cnn", params, features_dir="/runs/f")
    assert blocks == "mobilenet_v3_small:0,2,5 resnet50:0,2"  # resnet50: 5 trains all
    assert "caching mobilenet_v3_small" in reason and "caching resnet50" in reason
    assert "cnn declares no frozen backbone blocks" in reason  # the third model, said
    args = pools[0]["container_spec"]["args"]
    assert [a for a in args if a.startswith(("--model=", "--trainable_blocks="))] == [
        "--model=mobilenet_v3_small",
        "--model=resnet50",
        "--trainable_blocks=0,2,5",
        "--trainable_blocks=0,2",
    ]


@pytest.mark.parametrize(
    ("machine", "gpu", "count", "expected"),
    [
        ("n1-standard-8", "NVIDIA_TESLA_T4", 2, ("n1-standard-8", 1)),
        ("n1-standard-32", "NVIDIA_TESLA_T4", 4, ("n1-standard-4", 1)),  # takes 2 or 4 only
        ("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, ("a2-highgpu-1g", 1)),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8, ("a3-ultragpu-8g", 8)),  # no 1-GPU H200
        ("n1-standard-4", "", 2, ("n1-standard-4", 2)),  # local: logical CPU devices
    ],
)
def test_the_features_job_takes_one_gpu_on_a_machine_vertex_accepts(machine, gpu, count, expected):
    from pipelines.jobs import machines

    assert machines.one_accelerator(machine, gpu or None, count) == expected
    if gpu:
        machines.check_machine(*expected[:1], gpu, expected[1], what="features")


def test_nothing_to_cache_gives_empty_pools_and_no_folder():
    pools, base, location, blocks, reason = _spec("cnn", space(LR))
    assert (pools, base, location, blocks) == ([], "", "", "")
    assert "cnn declares no" in reason
    off = _spec(
        "resnet50", space({"id": "trainable_blocks", "type": "discrete", "values": [0]}), "off"
    )
    assert off[0] == [] and "feature_cache=off" in off[4]


def test_trials_and_the_final_job_get_features_only_when_a_cache_was_computed():
    computed = SimpleNamespace(metadata={trainer_args.FEATURES_DIR_KEY: "/runs/f"})
    skipped = SimpleNamespace(metadata={trainer_args.FEATURES_DIR_KEY: ""})
    assert trainer_args.features_flag(computed) == ["--features=/runs/f"]
    assert trainer_args.features_flag(skipped) == []
    assert trainer_args.features_flag(None) == []


@pytest.mark.parametrize("trial_workers", [0, 2])
def test_the_trial_job_spec_passes_the_features_folder_to_every_replica(trial_workers):
    from components.job_specs import trial_job_spec

    dataset = SimpleNamespace(uri="/r/d", path="/r/d")
    pools, _ = trial_job_spec.python_func(
        dataset=dataset,
        trainer_image="img:1",
        model="resnet50",
        weights="none",
        epochs=1,
        batch_size=8,
        metric_tag="val_accuracy",
        precision="float32",
        seed=1,
        machine_type="n1-standard-4",
        accelerator_type="",
        accelerator_count=0,
        worker_count=trial_workers,
        study_dir="/s",
        shared_root="",
        study_spec_parameters=[],
        study=SimpleNamespace(uri="/r/s", path="/r/s"),
        features=SimpleNamespace(metadata={trainer_args.FEATURES_DIR_KEY: "/runs/f"}),
    )
    assert [p["replica_count"] for p in pools] == [1] + ([trial_workers] if trial_workers else [])
    assert all(p["container_spec"]["args"][-1] == "--features=/runs/f" for p in pools)


def test_every_replica_of_the_final_job_gets_the_features_folder():
    from components.job_specs import final_job_spec

    pools, _ = final_job_spec.python_func(
        dataset=SimpleNamespace(uri="/r/d", path="/r/d"),
        best_parameters={"trainable_blocks": 0.0},
        trainer_image="img:1",
        model="resnet50",
        weights="none",
        epochs=1,
        batch_size=8,
        metric_tag="val_accuracy",
        precision="float32",
        seed=1,
        machine_type="n1-standard-4",
        accelerator_type="",
        accelerator_count=0,
        worker_count=1,
        shared_root="",
        job_dir=SimpleNamespace(uri="/r/j", path="/r/j", metadata={}),
        features=SimpleNamespace(metadata={trainer_args.FEATURES_DIR_KEY: "/runs/f"}),
    )
    assert [p["container_spec"]["args"].count("--features=/runs/f") for p in pools] == [1, 1]


# --- the step's record: reused or computed ---------------------------------------------------


def test_a_new_or_rewritten_entry_means_computed_else_reused(tmp_path):
    (tmp_path / "key-a").mkdir()
    before = features_artifact.entries(str(tmp_path))
    assert features_artifact.outcome(before, features_artifact.entries(str(tmp_path))) == "reused"
    (tmp_path / "key-b").mkdir()
    assert features_artifact.outcome(before, features_artifact.entries(str(tmp_path))) == "computed"
    before = features_artifact.entries(str(tmp_path))
    os.utime(tmp_path / "key-a", ns=(1, 1))  # rewritten in place (same key folder)
    assert features_artifact.outcome(before, features_artifact.entries(str(tmp_path))) == "computed"
    before = features_artifact.entries(str(tmp_path))
    (tmp_path / ".staging-key-c").mkdir()  # an entry still being written is not there yet
    assert features_artifact.outcome(before, features_artifact.entries(str(tmp_path))) == "reused"
    assert features_artifact.entries("gs://bucket/features") is None
    assert features_artifact.outcome(None, None) == "done"  # a gs:// cache (Kubeflow, Vertex)


def test_the_local_step_with_nothing_to_cache_records_why_and_runs_nothing():
    from pipelines.targets.local.steps.features import features_locally

    artifact = SimpleNamespace(metadata={})
    features_locally.python_func(
        worker_pool_specs=[],
        base_output_directory="",
        features_dir="",
        trainable_blocks="",
        reason="nothing to cache: cnn declares no frozen backbone blocks",
        features=artifact,
    )
    assert artifact.metadata["result"] == "skipped"
    assert artifact.metadata[trainer_args.FEATURES_DIR_KEY] == ""
    assert "cnn declares no" in artifact.metadata["reason"]


def test_the_run_summary_row_says_what_the_step_did():
    from pipelines.app import run_summary

    line = run_summary._features_line(
        {"result": "reused", "trainable_blocks": "0,2", "seconds": 1.24, "features_dir": "/f"}
    )
    assert line == "reused trainable_blocks 0,2 in 1.2 s → /f"
    assert run_summary._features_line({"result": "skipped", "reason": "why"}) == "skipped: why"


def test_the_vertex_features_job_is_a_custom_job_the_api_accepts():
    from pipelines.payloads import strict_parse
    from pipelines.targets.vertex import features_job

    pools = _spec("resnet50", space({"id": "trainable_blocks", "type": "discrete", "values": [0]}))[
        0
    ]
    payload = features_job.custom_job_payload(
        display_name="hpt-features",
        worker_pool_specs=[json.dumps(p) for p in pools],  # as kfp may hand list items
        base_output_directory="gs://b/root/features",
        labels={"team": "a"},
    )
    job = strict_parse("CustomJob", payload, "features job")
    assert "--trainable_blocks=0" in job.job_spec.worker_pool_specs[0].container_spec.args
    assert "network" not in payload["job_spec"] and "encryption_spec" not in payload


# --- compiled specs: the step between prepare and tune, feeding trials and the final job ------


STEP = {
    "local": "features-locally",
    "vertex": "features-on-vertex",
    "kubeflow": "features-on-kubeflow",
}


@pytest.mark.parametrize("target", ["local", "vertex", "kubeflow"])
def test_the_features_step_feeds_the_trial_and_final_job_specs(tmp_path, target):
    path = compile_pipeline(target, for_target(target), tmp_path / "p.yaml")
    spec = next(yaml.safe_load_all(Path(path).read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    plan = tasks["features-job-spec"]
    assert plan["inputs"]["artifacts"]["dataset"]["taskOutputArtifact"]["producerTask"] == (
        "prepare-dataset"
    )
    assert plan["inputs"]["parameters"]["feature_cache"] == {
        "componentInputParameter": "feature_cache"
    }
    step = tasks[STEP[target]]
    assert step["inputs"]["parameters"]["worker_pool_specs"]["taskOutputParameter"] == {
        "outputParameterKey": "worker_pool_specs",
        "producerTask": "features-job-spec",
    }
    for consumer in ("trial-job-spec", "final-job-spec"):
        assert tasks[consumer]["inputs"]["artifacts"]["features"]["taskOutputArtifact"] == {
            "outputArtifactKey": "features",
            "producerTask": STEP[target],
        }
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert parameters["feature_cache"]["defaultValue"] == "auto"
    assert parameters["features_dir"]["defaultValue"] == ""


def test_the_same_data_prepared_again_keeps_its_fingerprint(tmp_path):
    """A rerun prepares the dataset into a new folder: only `prepared_at` differs."""
    from trainer.feature_store import dataset_fingerprint

    meta = {"splits": {"train": {"shards": [{"file": "a", "sha256": "x"}]}}, "prepared_at": "t1"}
    for name, prepared_at in (("one", "t1"), ("two", "t2")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.json").write_text(
            json.dumps({**meta, "prepared_at": prepared_at})
        )
    (tmp_path / "other").mkdir()
    other = {**meta, "splits": {"train": {"shards": [{"file": "a", "sha256": "y"}]}}}
    (tmp_path / "other" / "metadata.json").write_text(json.dumps(other))
    one, two, three = (dataset_fingerprint(str(tmp_path / n)) for n in ("one", "two", "other"))
    assert one == two != three
