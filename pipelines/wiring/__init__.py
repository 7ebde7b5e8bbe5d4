"""The registry of targets, and what a target is (`pipelines.wiring.base`).

Each target is a package, `pipelines/targets/<name>/`; its `wiring.py` holds the `Binding`
that `pipelines.pipeline` plugs into the one DAG (which components run its steps).

`TARGETS` is the one registry of targets: a `Target` per name, holding (by name, imported
when used) its binding, its submit and schedule client, its preflight, its settings section
and its flags. Adding a target is new files and one line here (docs/targets.md).
"""

from __future__ import annotations

from pipelines.wiring.base import Binding, Target

TARGETS: dict[str, Target] = {
    "local": Target(
        "local",
        runs_here=True,
        client=None,
        preflight="pipelines.targets.local.cli.commands:preflight",
        tune_task="tune-locally",
        settings=frozenset({"output", "registry"}),
    ),
    "vertex": Target(
        "vertex",
        runs_here=False,
        client="pipelines.targets.vertex.cli.commands",
        preflight="pipelines.targets.vertex.cli.preflight:check_cloud_run",
        tune_task="tune-on-vertex",
        settings=frozenset(
            {
                "project",
                "region",
                "kms_key",
                "parent_model",
                "keep_default_version",
                "serving_image",
            }
        ),
        flags=(
            "filter",
            "project",
            "region",
            "network",
            "kms_key",
            "label",
            "wait",
            "max_runs",
            "allow_queueing",
            "force",
        ),
        flag_note="a Vertex flag, not used with --target {target}",
    ),
    "kubeflow": Target(
        "kubeflow",
        runs_here=False,
        client="pipelines.targets.kubeflow.cli.commands",
        preflight="pipelines.targets.kubeflow.cli.preflight:check_kubeflow_run",
        tune_task="tune-on-katib",
        settings=frozenset(
            {"kubeflow_host", "kubeflow_namespace", "kubeflow_service_account", "data_pvc"}
            | {"data_mount_path", "kubeflow_cpu", "kubeflow_memory", "model_registry_url"}
            | {"kubeflow_timeout_s", "kubeflow_job_api", "kubeflow_pending_grace_s"}
            | {"kubeflow_trial_nodes", "kubeflow_spot_node_label"}
            | {"kubeflow_token", "kubeflow_token_file", "kubeflow_cookie"}
        ),
        flags=("host", "namespace", "token", "cookie"),
        flag_note="only used with --target kubeflow",
        exclusive={"data_pvc": "a PersistentVolumeClaim is for the kubeflow target"},
    ),
}


def target_for(name: str) -> Target:
    """The registered `Target` called `name`.

    Raises:
        ValueError: Unknown target (one line naming it and the known ones).
    """
    if name not in TARGETS:
        raise ValueError(f"target={name!r}: expected one of {', '.join(TARGETS)}")
    return TARGETS[name]


def binding_for(target: str) -> Binding:
    """The `Binding` of `target`.

    Raises:
        ValueError: Unknown target (one line naming it and the known ones).
    """
    return target_for(target).binding


def tune_tasks() -> dict[str, str]:
    """Each target's tune task name (kfp's, in a compiled spec) → the target."""
    return {target.tune_task: name for name, target in TARGETS.items()}
