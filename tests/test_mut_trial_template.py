"""The Katib trial template where mutmut found it unpinned: GPUs, the pool's replicas, the
values Katib substitutes into `sh -c`, and the Job's pod without the optional fields.

Each test reads the trial Job inside the Experiment as Katib gets it (`build_experiment`,
through Katib's models), or the one-line refusal a user sees.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.targets.kubeflow.trial_template import KatibSpecError
from tests.test_kubeflow_katib import as_kfp_renders, build, container, pools

FLAT = SearchSpace(parameters=(Parameter("learning_rate", "double", min=1e-4, max=0.1),))


def with_machine(**machine: Any) -> list[dict[str, Any]]:
    pool = pools()[0]
    return [{**pool, "machine_spec": {"machine_type": "n1-standard-8", **machine}}]


@pytest.mark.parametrize(
    "machine",
    [
        {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 0},
        {"accelerator_type": "NVIDIA_TESLA_T4"},
        {"accelerator_count": 2},
        {"accelerator_type": "TPU_V3", "accelerator_count": 0},
    ],
    ids=["type-count-0", "type-no-count", "count-no-type", "tpu-count-0"],
)
def test_a_trial_asks_for_a_gpu_only_with_a_type_and_a_count_else_sees_none(
    machine: dict[str, Any],
) -> None:
    c = container(build(FLAT, worker_pool_specs=as_kfp_renders(with_machine(**machine))))
    amounts = {"cpu": "2", "memory": "8Gi"}
    assert c["resources"] == {"requests": amounts, "limits": amounts}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in c["env"]


def test_a_gpu_count_as_kfp_renders_it_is_requested_whole() -> None:
    pool = with_machine(accelerator_type="NVIDIA_L4", accelerator_count=2.0)
    c = container(build(FLAT, worker_pool_specs=pool))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in c["env"]}


def test_a_pool_without_replica_count_is_one_replica() -> None:
    pool = {k: v for k, v in pools()[0].items() if k != "replica_count"}
    assert (
        container(build(FLAT, worker_pool_specs=[pool]))["image"]
        == pool["container_spec"]["image_uri"]
    )


def test_no_pool_is_refused_in_one_line() -> None:
    with pytest.raises(KatibSpecError) as err:
        build(FLAT, worker_pool_specs=[])
    assert str(err.value) == (
        "worker_pool_specs: 0 replicas, expected 1; a Katib trial here runs one pod per node "
        "(a chief and trial_workers=0 workers)"
    )


def test_a_value_sh_c_would_split_is_refused_naming_the_parameter() -> None:
    """Katib puts each proposed value into the `sh -c` line: `a b` would be two words."""
    space = SearchSpace(parameters=(Parameter("optimizer", "categorical", values=("sgd", "a b")),))
    with pytest.raises(KatibSpecError) as err:
        build(space)
    assert str(err.value) == (
        "parameter 'optimizer' value 'a b': Katib's pod webhook runs the trial command through "
        "`sh -c` with words joined by spaces; use words without spaces or shell characters"
    )


def test_a_pod_without_account_or_claim_has_neither_and_no_mount() -> None:
    exp = build(FLAT)
    pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    assert "serviceAccountName" not in pod and "volumes" not in pod
    assert "volumeMounts" not in container(exp)


def test_a_relative_mount_path_without_a_claim_is_not_used_so_not_refused() -> None:
    assert "volumeMounts" not in container(build(FLAT, data_mount_path="mnt"))


def test_a_pool_without_a_command_is_refused_whole() -> None:
    pool = {**pools()[0], "container_spec": {"image_uri": "ghcr.io/acme/t:v1"}}
    with pytest.raises(KatibSpecError) as err:
        build(FLAT, worker_pool_specs=[pool])
    assert str(err.value) == (
        "worker_pool_specs[0].container_spec: needs image_uri and command (the pod webhook "
        "wraps the command; it cannot run an image's entrypoint unresolved)"
    )


def test_the_pools_environment_reaches_the_trial_beside_katibs_variables() -> None:
    pool = {**pools()[0]}
    pool["container_spec"] = {**pool["container_spec"], "env": [{"name": "HPT_X", "value": 1}]}
    env = {e["name"]: e["value"] for e in container(build(FLAT, worker_pool_specs=[pool]))["env"]}
    assert env == {
        "HPT_X": "1",
        "CLOUD_ML_HP_METRIC_FILE": "/tmp/hypertune/output.metrics",
        "CLOUD_ML_TRIAL_ID": "${trialParameters.trialName}",
        "NVIDIA_VISIBLE_DEVICES": "void",
    }


def test_the_trial_pods_carry_the_experiments_watch_label() -> None:
    """The tune step lists the trial pods by this label (`pod_watch`) to fail fast."""
    pod = build(FLAT)["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]
    assert pod["metadata"] == {
        "annotations": {"sidecar.istio.io/inject": "false"},
        "labels": {"hpt-pipeline.dev/experiment": "hpt-study"},
    }
