"""The Kubernetes API as the Kubeflow components use it: custom objects, created once.

`custom_objects_api` loads the in-cluster configuration (a component runs in a
pod) and falls back to the kubeconfig (a developer's machine). `create_or_get`
creates an object or, when one with that name exists already (a retried task),
returns it, so a retry waits on the same job instead of starting a second one.
`deleted_on_sigterm` deletes the object when the run is cancelled (KFP stops the
step's pod with SIGTERM, which reaches Python: `components.base.exec_python`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

CANCELLED_EXIT = 128 + signal.SIGTERM  # what a process killed by SIGTERM reports
# Kubeflow profile namespaces (and `kubeflow`) inject Istio's sidecar; a pod that must *finish*
# (a trial's Job, a TFJob replica) opts out, or the sidecar keeps it Running for ever.
NO_SIDECAR = {"sidecar.istio.io/inject": "false"}


def _load_config() -> Any:
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client


def custom_objects_api() -> Any:
    """A `kubernetes.client.CustomObjectsApi`: in-cluster config, else the kubeconfig.

    Raises:
        kubernetes.config.ConfigException: Neither is available.
    """
    return _load_config().CustomObjectsApi()


def core_v1_api() -> Any:
    """A `kubernetes.client.CoreV1Api` (namespaces, claims, nodes), configured as above."""
    return _load_config().CoreV1Api()


def create_or_get(
    api: Any, *, group: str, version: str, plural: str, body: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Create `body` in its namespace, or get the object that already has its name.

    Args:
        api: A `CustomObjectsApi` (or a stand-in with the same two methods).
        group: API group, e.g. `kubeflow.org`.
        version: API version, e.g. `v1`.
        plural: Resource, e.g. `tfjobs`.
        body: The object; `metadata.name` and `metadata.namespace` are used.

    Returns:
        (the object as the API returned it, whether it was created now).

    Raises:
        kubernetes.client.ApiException: Any refusal but "already exists" (409).
    """
    from kubernetes.client import ApiException

    meta = body["metadata"]
    try:
        created = api.create_namespaced_custom_object(
            group, version, meta["namespace"], plural, dict(body)
        )
        return created, True
    except ApiException as err:
        if err.status != 409:
            raise
    found = api.get_namespaced_custom_object(
        group, version, meta["namespace"], plural, meta["name"]
    )
    return found, False


def api_error_line(err: Any) -> str:
    """One line from a `kubernetes.client.ApiException`: status, reason and the API's message."""
    import json

    message = ""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (TypeError, ValueError):
        message = str(err.body or "")
    text = " ".join(f"{err.status} {err.reason}: {message}".split())
    return text.rstrip(": ")


@contextlib.contextmanager
def deleted_on_sigterm(
    api: Any,
    *,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    name: str,
    echo: Callable[[str], None] = print,
) -> Iterator[None]:
    """While inside, SIGTERM deletes the object (dependents in the background) and exits 143.

    The Kubeflow counterpart of GCPC's cancel-on-SIGTERM: a cancelled run stops
    the Experiment or TFJob its step waits on. Deleting is how both are stopped:
    Katib's Trials, and the Training Operator's pods, are owned by the object and
    garbage-collected with it. Outside the main thread (no signal handlers there)
    nothing is installed.

    Args:
        api: A `CustomObjectsApi` (or a stand-in with `delete_namespaced_custom_object`).
        group: API group.
        version: API version.
        plural: Resource.
        namespace: The object's namespace.
        name: The object's name (deleted even if this task did not create it: the run waits on it).
        echo: Where the cancellation line goes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(_signum: int, _frame: Any) -> None:
        from kubernetes.client import ApiException

        where = f"{plural} {namespace}/{name}"
        try:
            api.delete_namespaced_custom_object(
                group, version, namespace, plural, name, propagation_policy="Background"
            )
            echo(f"Cancelled: {where} deleted")
        except ApiException as err:
            if err.status != 404:
                echo(f"Cancelled: {where} NOT deleted ({api_error_line(err)})")
        raise SystemExit(CANCELLED_EXIT)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
