"""worker_pool_specs builders and their strict checks; no TensorFlow in pipelines/."""

from __future__ import annotations

import json

import pytest

from pipelines.jobs import worker_pools as wp
from pipelines.study import study_spec_check
from pipelines.study.search_space import default_search_space
from pipelines.vertex_types import enum_name
from tests.conftest import python_stdout

CONTAINER = dict(
    image_uri="us-docker.pkg.dev/p/hpt/trainer:1",
    command=["python", "-m", "trainer.task"],
    args=["--data=gs://b/data", "--epochs=5"],
    env={"TF_CPP_MIN_LOG_LEVEL": "2"},
)


def test_trial_pool_is_one_replica_with_machine_accelerators_and_container():
    (pool,) = wp.trial_worker_pool_specs(
        **CONTAINER,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2,
    )
    assert pool == {
        "machine_spec": {
            "machine_type": "n1-standard-8",
            "accelerator_type": "NVIDIA_TESLA_T4",
            "accelerator_count": 2,
        },
        "replica_count": 1,
        "container_spec": {
            "image_uri": CONTAINER["image_uri"],
            "command": ["python", "-m", "trainer.task"],
            "args": ["--data=gs://b/data", "--epochs=5"],
            "env": [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}],
        },
    }
    (parsed,) = wp.validate_worker_pool_specs([pool])
    assert enum_name(parsed.machine_spec, "accelerator_type") == "NVIDIA_TESLA_T4"
    assert parsed.machine_spec.accelerator_count == 2
    assert list(parsed.container_spec.args) == CONTAINER["args"]
    assert parsed.container_spec.env[0].name == "TF_CPP_MIN_LOG_LEVEL"


def test_round_trip_through_worker_pool_spec_proto():
    from google.cloud.aiplatform_v1.types import WorkerPoolSpec

    specs = wp.training_worker_pool_specs(**CONTAINER, worker_count=3)
    for spec, parsed in zip(specs, wp.validate_worker_pool_specs(specs), strict=True):
        back = json.loads(
            WorkerPoolSpec.to_json(
                WorkerPoolSpec.deserialize(parsed.SerializeToString()),
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=False,
            )
        )
        assert back["machine_spec"] == spec["machine_spec"]
        assert int(back["replica_count"]) == spec["replica_count"]
        assert back["container_spec"] == spec["container_spec"]


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_final_job_is_a_chief_pool_and_a_worker_pool(workers):
    specs = wp.training_worker_pool_specs(**CONTAINER, worker_count=workers)
    assert [s["replica_count"] for s in specs] == [1] + ([workers] if workers else [])
    assert all(s["container_spec"] == specs[0]["container_spec"] for s in specs)
    assert len(wp.validate_worker_pool_specs(specs)) == len(specs)


def test_no_accelerator_fields_without_accelerators():
    (pool,) = wp.trial_worker_pool_specs(**CONTAINER)
    assert pool["machine_spec"] == {"machine_type": wp.DEFAULT_MACHINE_TYPE}


def test_builder_errors():
    with pytest.raises(wp.PayloadError, match="needs an accelerator_type"):
        wp.trial_worker_pool_specs(**CONTAINER, accelerator_count=1)
    with pytest.raises(wp.PayloadError, match="worker_count=-1"):
        wp.training_worker_pool_specs(**CONTAINER, worker_count=-1)


def _pool(**changes):
    (pool,) = wp.trial_worker_pool_specs(**CONTAINER)
    pool.update(changes)
    return pool


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([_pool(bogus=1)], 'no field named "bogus"'),
        ([_pool(replica_count=2)], "pool 0 is the chief, replica_count must be 1"),
        ([{}], "pool 0 (the chief) cannot be empty"),
        ([], "expected at least pool 0"),
        ([_pool(machine_spec={"machine_type": "n1", "accelerator_type": "TPU_9000"})], "TPU_9000"),
        ([_pool(replicaCount=1)], "'replicaCount' is camelCase"),
        ([_pool(), _pool(replica_count=0)], "replica_count=0, expected >= 1"),
        ([_pool(), _pool(container_spec={"image_uri": "", "command": ["x"]})], "image_uri"),
        ([_pool()] * 5, "at most 4"),
    ],
)
def test_strict_worker_pool_validation(specs, expected):
    with pytest.raises(wp.PayloadError) as err:
        wp.validate_worker_pool_specs(specs)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_skipped_pools_and_json_strings_are_accepted():
    chief = _pool()
    parsed = wp.validate_worker_pool_specs([json.dumps(chief), {}, {}, chief])
    assert [p.replica_count for p in parsed] == [1, 0, 0, 1]


def test_study_spec_strict_parse():
    space = default_search_space()
    parameters, metrics = space.to_study_spec_parameters(), space.to_study_spec_metrics()
    spec = study_spec_check.validate_study_spec(
        parameters, metrics, "GRID_SEARCH", "LAST_MEASUREMENT"
    )
    assert enum_name(spec, "algorithm") == "GRID_SEARCH"
    assert enum_name(spec, "measurement_selection_type") == "LAST_MEASUREMENT"
    assert spec.metrics[0].metric_id == "val_accuracy"
    assert enum_name(spec.metrics[0], "goal") == "MAXIMIZE"
    with pytest.raises(wp.PayloadError, match="study_spec_algorithm='BAYES'"):
        study_spec_check.validate_study_spec(parameters, metrics, "BAYES")
    with pytest.raises(wp.PayloadError, match="measurement_selection_type='BEST'"):
        study_spec_check.validate_study_spec(parameters, metrics, "GRID_SEARCH", "BEST")
    with pytest.raises(wp.PayloadError, match='no field named "oops"'):
        study_spec_check.validate_study_spec([{**parameters[0], "oops": 1}], metrics)
    with pytest.raises(wp.PayloadError, match="study_spec_metrics: empty"):
        study_spec_check.validate_study_spec(parameters, [])


def test_pipelines_modules_do_not_import_tensorflow():
    code = (
        "import sys\n"
        "import pipelines.study.search_space, pipelines.jobs.worker_pools, pipelines.study.trials\n"
        "import pipelines.jobs.local_job, pipelines.targets.local.local_study\n"
        "from pipelines.study import search_space\n"
        "search_space.default_search_space().to_study_spec_parameters()\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    assert python_stdout(code).strip() == ""


def test_artifact_locations_with_and_without_a_shared_volume():
    from types import SimpleNamespace

    from pipelines.jobs.trainer_args import artifact_location, shared_location

    vertex = SimpleNamespace(uri="gs://b/root/x/dataset", path="/gcs/b/root/x/dataset", metadata={})
    assert artifact_location(vertex) == shared_location(vertex, "/mnt/hpt") == vertex.uri
    local = SimpleNamespace(uri="/runs/a/dataset", path="/runs/a/dataset", metadata={})
    assert shared_location(local, "") == "/runs/a/dataset"
    kfp = SimpleNamespace(
        uri="minio://mlpipeline/v2/artifacts/p/run-1/prepare-dataset/9/dataset",
        path="/minio/mlpipeline/v2/artifacts/p/run-1/prepare-dataset/9/dataset",
        metadata={},
    )
    written = shared_location(kfp, "/mnt/hpt/")
    assert written == "/mnt/hpt/v2/artifacts/p/run-1/prepare-dataset/9/dataset"
    # Readers find it through the location the writer recorded.
    assert kfp.metadata["location"] == written == artifact_location(kfp)


GPUS = dict(machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2)


def test_on_cloud_targets_every_replica_is_told_how_many_gpus_it_must_see():
    (trial,) = wp.trial_worker_pool_specs(**CONTAINER, **GPUS, expect_gpus=True)
    assert trial["container_spec"]["args"] == [*CONTAINER["args"], "--expected_gpus=2"]
    chief, workers = wp.training_worker_pool_specs(
        **CONTAINER, **GPUS, worker_count=2, expect_gpus=True
    )
    for pool in (chief, workers):
        assert pool["container_spec"]["args"] == [*CONTAINER["args"], "--expected_gpus=2"]
        assert pool["machine_spec"] == {
            "machine_type": "n1-standard-8",
            "accelerator_type": "NVIDIA_TESLA_T4",
            "accelerator_count": 2,
        }
        assert pool["container_spec"]["env"] == [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}]
    # Locally (the default) the count means CPU devices; TPUs are no GPUs.
    (local,) = wp.trial_worker_pool_specs(**CONTAINER, **GPUS)
    tpu = {
        **GPUS,
        "machine_type": "cloud-tpu",
        "accelerator_type": "TPU_V3",
        "accelerator_count": 8,
    }
    (on_tpu,) = wp.trial_worker_pool_specs(**CONTAINER, **tpu, expect_gpus=True)
    assert local["container_spec"]["args"] == on_tpu["container_spec"]["args"] == CONTAINER["args"]
    assert len(wp.training_worker_pool_specs(**CONTAINER)) == 1  # no workers by default
    (local_chief,) = wp.training_worker_pool_specs(**CONTAINER, **GPUS)
    assert local_chief["container_spec"]["args"] == CONTAINER["args"]


def test_builder_and_validation_messages_name_the_value_and_the_pool():
    def refusal(call, *args, **kwargs) -> str:
        with pytest.raises(wp.PayloadError) as err:
            call(*args, **kwargs)
        return str(err.value)

    assert refusal(wp.trial_worker_pool_specs, **CONTAINER, accelerator_count=-1) == (
        "accelerator_count=-1: expected >= 0"
    )
    assert refusal(wp.trial_worker_pool_specs, **CONTAINER, accelerator_count=1) == (
        "accelerator_count=1 needs an accelerator_type (e.g. NVIDIA_TESLA_T4)"
    )
    assert refusal(wp.validate_worker_pool_specs, []) == (
        "worker_pool_specs: empty, expected at least pool 0 (the chief)"
    )
    assert refusal(wp.validate_worker_pool_specs, [_pool()] * 5) == (
        "worker_pool_specs: 5 pools, expected at most 4 "
        "(chief, workers, parameter servers, evaluator)"
    )
    assert refusal(wp.validate_worker_pool_specs, [_pool(), _pool(replicaCount=1)]) == (
        "worker_pool_specs[1]: key 'replicaCount' is camelCase, expected snake_case"
    )
    as_json = json.dumps(_pool(replicaCount=1))  # a pool as the compiled spec may carry it
    assert refusal(wp.validate_worker_pool_specs, [as_json]) == (
        "worker_pool_specs[0]: key 'replicaCount' is camelCase, expected snake_case"
    )
    bogus = refusal(wp.validate_worker_pool_specs, [_pool(), _pool(bogus=1)])
    assert bogus.startswith("worker_pool_specs[1]")
