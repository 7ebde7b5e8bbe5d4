"""The final job's TFJob where mutmut found it unpinned: its name, its GPUs, its TF_CONFIG.

Each test reads what the cluster gets (the manifest `build_tfjob` writes, the name `kubectl
get tfjobs` shows, the `TF_CONFIG` the operator hands a replica), not the module's constants.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.targets.kubeflow import tfjob, trainjob
from pipelines.targets.kubeflow.kube import ReplicaPods
from tests import tfjob_operator

IMAGE = "registry.example.com/hpt/trainer:v1"
BASE = "/mnt/hpt/runs/run-1/final-job"


# --------------------------------------------------------------------------- the name


def test_the_name_is_the_readable_prefix_final_and_ten_hex_digits_of_the_folder() -> None:
    """What `kubectl get tfjobs` shows; a retried step, or this release after the last one,
    looks the job up by exactly this name."""
    assert (
        trainjob.trainjob_name("HPT Pipeline: nightly!", "gs://b/run-1/final")
        == "hpt-pipeline-nightly-final-099ac23ebe"
    )


def test_a_long_prefix_keeps_its_first_30_characters() -> None:
    assert trainjob.trainjob_name("x" * 200, "r") == "x" * 30 + "-final-454349e422"


def test_a_prefix_cut_at_a_dash_leaves_no_double_dash() -> None:
    """The 30-character cut lands on the `-` that stood for the space: it is dropped."""
    assert trainjob.trainjob_name("a" * 29 + " b", "r") == "a" * 29 + "-final-454349e422"


def test_a_prefix_starting_with_digits_or_dashes_starts_at_its_first_letter() -> None:
    assert trainjob.trainjob_name("--9 Nightly", "r") == "nightly-final-454349e422"
    assert trainjob.trainjob_name("2024!", "r") == "hpt-final-454349e422"


# --------------------------------------------------------------------------- the GPUs


def container(machine_spec: dict[str, Any]) -> dict[str, Any]:
    pool = {
        "replica_count": 1,
        "machine_spec": {"machine_type": "n1-standard-8", **machine_spec},
        "container_spec": {"image_uri": IMAGE, "command": ["python", "-m", "trainer.task"]},
    }
    job = tfjob.build_tfjob("hpt-final-x", "team-a", [pool], BASE, ReplicaPods("4", "16Gi"))
    manifest = tfjob.to_manifest(job)
    (main,) = manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"]
    return main  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "machine_spec",
    [
        {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 0},
        {"accelerator_type": "NVIDIA_TESLA_T4"},
        {"accelerator_count": 2},
    ],
    ids=["type-count-0", "type-no-count", "count-no-type"],
)
def test_a_gpu_is_requested_only_with_a_type_and_a_count_else_the_pod_sees_none(
    machine_spec: dict[str, Any],
) -> None:
    """As Vertex attaches accelerators (a type and a count); a pod that asks for none is
    told to see none, whatever node it lands on."""
    main = container(machine_spec)
    amounts = {"cpu": "4", "memory": "16Gi"}
    assert main["resources"] == {"requests": amounts, "limits": amounts}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in main["env"]


def test_a_type_and_a_count_request_that_many_gpus_and_hide_none() -> None:
    main = container({"accelerator_type": "NVIDIA_L4", "accelerator_count": 2})
    amounts = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}
    assert main["resources"] == {"requests": amounts, "limits": amounts}
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in main["env"]}


# --------------------------------------------------------------------------- TF_CONFIG

REPLICAS = {"Chief": 1, "Worker": 1}


def test_without_a_cluster_domain_set_the_addresses_end_at_svc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(tfjob_operator.CLUSTER_DOMAIN_ENV, raising=False)
    config = tfjob_operator.operator_tf_config("final", "team-a", REPLICAS, "Chief", 0)
    assert config is not None
    assert config["cluster"] == {
        "chief": ["final-chief-0.team-a.svc:2222"],
        "worker": ["final-worker-0.team-a.svc:2222"],
    }


def test_the_operators_custom_cluster_domain_is_read_from_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUSTOM_CLUSTER_DOMAIN", "corp.example")
    config = tfjob_operator.operator_tf_config("final", "team-a", REPLICAS, "Worker", 0)
    assert config is not None
    assert config["cluster"]["worker"] == ["final-worker-0.team-a.svc.corp.example:2222"]
    # Given explicitly, the argument wins over the environment (none: "").
    config = tfjob_operator.operator_tf_config(
        "final", "team-a", REPLICAS, "Worker", 0, cluster_domain=""
    )
    assert config is not None
    assert config["cluster"]["worker"] == ["final-worker-0.team-a.svc:2222"]


def test_a_slash_in_the_host_name_becomes_a_dash_as_in_the_operators_gen_cluster_spec() -> None:
    """release-1.9 `common.GenGeneralName`: `strings.Replace(name, "/", "-", -1)`."""
    config = tfjob_operator.operator_tf_config("a/b", "ns", REPLICAS, "Chief", 0, cluster_domain="")
    assert config is not None
    assert config["cluster"]["chief"] == ["a-b-chief-0.ns.svc:2222"]


# --------------------------------------------------------------------------- the webhook's rules


def manifest() -> dict[str, Any]:
    pools = [
        {"replica_count": 1, "container_spec": {"image_uri": IMAGE}},
        {"replica_count": 2, "container_spec": {"image_uri": IMAGE}},
    ]
    job = tfjob.build_tfjob("hpt-final-x", "team-a", pools, BASE, ReplicaPods("1", "1Gi"))
    return tfjob.to_manifest(job)


def refusal(manifest: dict[str, Any]) -> str:
    with pytest.raises(tfjob.TFJobError) as err:
        tfjob.validate_tfjob(manifest)
    return str(err.value)


def test_a_name_of_63_characters_is_a_dns_label_and_64_is_not() -> None:
    job = manifest()
    job["metadata"]["name"] = "a" * 63
    tfjob.validate_tfjob(job)
    job["metadata"]["name"] = "a" * 64
    assert refusal(job) == (
        f"metadata.name={'a' * 64!r}: expected a DNS-1035 label (lowercase letters, digits, "
        "-; starts with a letter; at most 63)"
    )


def test_a_manifest_without_a_name_is_refused_naming_the_empty_name() -> None:
    job = manifest()
    del job["metadata"]["name"]
    assert refusal(job).startswith("metadata.name='': expected a DNS-1035 label")
    job.pop("metadata")
    assert refusal(job).startswith("metadata.name='': expected a DNS-1035 label")


def test_no_replica_specs_and_a_container_without_an_image_are_refused_whole() -> None:
    job = manifest()
    job["spec"]["tfReplicaSpecs"] = {}
    assert refusal(job) == "spec.tfReplicaSpecs: must be set"
    job = manifest()
    job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = ""
    assert refusal(job) == "spec.tfReplicaSpecs.Worker: container tensorflow: no image"


# --------------------------------------------------------------------------- the replicas


def replica_counts(worker_pool: dict[str, Any] | None) -> dict[str, int]:
    pools = [{"replica_count": 1, "container_spec": {"image_uri": IMAGE}}]
    if worker_pool is not None:
        pools.append({"container_spec": {"image_uri": IMAGE}, **worker_pool})
    job = tfjob.build_tfjob("hpt-final-x", "team-a", pools, BASE, ReplicaPods("1", "1Gi"))
    specs = tfjob.to_manifest(job)["spec"]["tfReplicaSpecs"]
    return {rtype: spec["replicas"] for rtype, spec in specs.items()}


@pytest.mark.parametrize(
    ("worker_pool", "counts"),
    [
        (None, {"Chief": 1}),
        ({}, {"Chief": 1}),  # a pool without replica_count has none, as in Vertex's proto
        ({"replica_count": 0}, {"Chief": 1}),
        ({"replica_count": 1}, {"Chief": 1, "Worker": 1}),
        ({"replica_count": 3.0}, {"Chief": 1, "Worker": 3}),  # as kfp renders numbers
    ],
    ids=["one-pool", "no-count", "zero", "one", "three"],
)
def test_the_worker_pool_becomes_that_many_workers_and_an_empty_one_none(
    worker_pool: dict[str, Any] | None, counts: dict[str, int]
) -> None:
    assert replica_counts(worker_pool) == counts


def test_a_chief_pool_without_replica_count_is_the_one_chief() -> None:
    pools = [{"container_spec": {"image_uri": IMAGE}}]
    job = tfjob.build_tfjob("hpt-final-x", "team-a", pools, BASE, ReplicaPods("1", "1Gi"))
    specs = tfjob.to_manifest(job)["spec"]["tfReplicaSpecs"]
    assert {rtype: spec["replicas"] for rtype, spec in specs.items()} == {"Chief": 1}


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        ([], "worker_pool_specs: empty, expected pool 0 (the chief)"),
        (
            [{"replica_count": 2, "container_spec": {"image_uri": IMAGE}}],
            "worker_pool_specs[0]: replica_count=2, pool 0 is the chief (1 replica)",
        ),
        (
            [{"replica_count": 1, "container_spec": {"image_uri": IMAGE}}] * 3,
            "worker_pool_specs: 3 pools, a TFJob here has a chief pool and a worker pool (no "
            "parameter servers or evaluator)",
        ),
    ],
    ids=["none", "two-chiefs", "three-pools"],
)
def test_pools_that_make_no_tfjob_are_refused_whole(pools: list[Any], message: str) -> None:
    with pytest.raises(tfjob.TFJobError) as err:
        tfjob.build_tfjob("hpt-final-x", "team-a", pools, BASE, ReplicaPods("1", "1Gi"))
    assert str(err.value) == message
