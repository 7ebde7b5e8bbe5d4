"""The stored Vertex API descriptors are the SDK's, and parse payloads exactly as the SDK does."""

from __future__ import annotations

import json

import pytest
from google.cloud.aiplatform_v1 import types

from pipelines import vertex_types
from pipelines.jobs import worker_pools
from pipelines.study.search_space import default_search_space
from tests.conftest import python_stdout


def sdk_class(name: str):
    cls = types
    for part in name.split("."):
        cls = getattr(cls, part)
    return cls


def test_the_stored_descriptors_are_the_installed_sdks() -> None:
    assert vertex_types.DESCRIPTORS.read_bytes() == vertex_types.descriptor_set_from_sdk(), (
        "pipelines/vertex_types.binpb is stale: run `python -m pipelines.vertex_types`"
    )


def _pool(**changes):
    (pool,) = worker_pools.training_worker_pool_specs(
        image_uri="gcr.io/p/t:1",
        command=["python", "-m", "trainer.task"],
        args=["--data=gs://b/d"],
        env={"A": "1"},
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2,
    )
    return {**pool, **changes}


SPACE = default_search_space()
CASES = [
    ("WorkerPoolSpec", _pool()),
    ("WorkerPoolSpec", {}),
    ("WorkerPoolSpec", _pool(bogus=1)),
    ("WorkerPoolSpec", _pool(machine_spec={"machine_type": "n1", "accelerator_type": "TPU_9"})),
    ("WorkerPoolSpec", _pool(replica_count="two")),
    ("WorkerPoolSpec", _pool(disk_spec={"boot_disk_size_gb": 200, "boot_disk_type": "pd-ssd"})),
    ("WorkerPoolSpec", {"python_package_spec": {"python_module": "m", "args": ["--x=1"]}}),
    ("WorkerPoolSpec", {"containerSpec": {"imageUri": "x"}}),  # camelCase: the parser's own rule
    (
        "StudySpec",
        {
            "parameters": SPACE.to_study_spec_parameters(),
            "metrics": SPACE.to_study_spec_metrics(),
            "algorithm": "RANDOM_SEARCH",
            "measurement_selection_type": "LAST_MEASUREMENT",
        },
    ),
    ("StudySpec", {"parameters": [{"parameter_id": "x", "oops": 1}]}),
    ("StudySpec", {"algorithm": "BAYES"}),
    ("StudySpec.ParameterSpec", SPACE.to_study_spec_parameters()[0]),
    ("StudySpec.ParameterSpec", {"parameter_id": "u", "double_value_spec": {"min_value": "a"}}),
    ("StudySpec.MetricSpec", {"metric_id": "loss", "goal": 2}),
    ("StudySpec.MetricSpec", {"metric_id": "loss", "goal": "LOWEST"}),
]


@pytest.mark.parametrize(("name", "payload"), CASES)
def test_a_payload_parses_or_fails_as_with_the_sdk(name: str, payload: dict) -> None:
    """The SDK's `from_json` is the oracle: same message bytes, or the same error words."""
    text = json.dumps(payload)
    try:
        expected = sdk_class(name).serialize(sdk_class(name).from_json(text))
    except Exception as err:  # noqa: BLE001  the oracle's error, whatever its type
        with pytest.raises(type(err)) as ours:
            vertex_types.parse(name, payload)
        assert str(ours.value) == str(err)
    else:
        assert vertex_types.parse(name, payload).SerializeToString() == expected
        assert vertex_types.parse(name, text).SerializeToString() == expected


def test_enum_names_are_the_sdks() -> None:
    spec = vertex_types.parse("StudySpec", CASES[8][1])
    sdk = types.StudySpec.from_json(json.dumps(CASES[8][1]))
    assert vertex_types.enum_name(spec, "algorithm") == sdk.algorithm.name == "RANDOM_SEARCH"
    parameter = spec.parameters[0]
    assert vertex_types.enum_name(parameter, "scale_type") == sdk.parameters[0].scale_type.name


def test_payload_checks_import_neither_the_sdk_nor_tensorflow() -> None:
    """What the job-spec steps and the local executors call: no 0.7 s SDK import."""
    probe = (
        "import sys\n"
        "from pipelines.jobs import worker_pools\n"
        "from pipelines.study import spec_reader, study_spec_check\n"
        "from pipelines.study.search_space import default_search_space\n"
        "space = default_search_space()\n"
        "p, m = space.to_study_spec_parameters(), space.to_study_spec_metrics()\n"
        "study_spec_check.validate_study_spec(p, m)\n"
        "assert spec_reader.from_study_spec(p, m) == space\n"
        "pools = worker_pools.training_worker_pool_specs(image_uri='x', command=['c'],"
        " args=[], worker_count=2)\n"
        "parsed = worker_pools.validate_worker_pool_specs(pools)\n"
        "assert [s.replica_count for s in parsed] == [1, 2]\n"
        "print(sorted(m for m in sys.modules if m.startswith(('google.cloud.aiplatform',"
        " 'tensorflow', 'proto'))))\n"
    )
    assert python_stdout(probe).strip() == "[]"
