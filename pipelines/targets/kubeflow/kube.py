"""The Kubernetes API as the Kubeflow components use it: custom objects, created once.

`custom_objects_api` loads the in-cluster configuration (a component runs in a
pod) and falls back to the kubeconfig (a developer's machine). `create_or_get`
creates an object or, when one with that name exists already (a retried task),
returns it, so a retry waits on the same job instead of starting a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def custom_objects_api() -> Any:
    """A `kubernetes.client.CustomObjectsApi`: in-cluster config, else the kubeconfig.

    Raises:
        kubernetes.config.ConfigException: Neither is available.
    """
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CustomObjectsApi()


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
