"""Waiting for a Kubernetes custom object (Katib Experiment, TFJob) by its status conditions.

Both keep a list of conditions (`Created`, `Running`, `Restarting`, `Succeeded`, `Failed`)
in `status.conditions`, appended as they become True, so the object's state is the last
condition whose status is "True". Katib ends an Experiment `Failed` when the failure budget
is spent and `Succeeded` when the trial budget, the goal or the suggestions are, which is
what `wait_for` reports with its default condition types. Katib's source for both:
docs/kubeflow.md, "Katib, as its source behaves".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class KubeflowJobError(RuntimeError):
    """A Kubeflow object failed, or did not finish in time (one line)."""


def last_true_condition(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object's current state: its last status condition whose status is "True".

    Args:
        obj: The custom object as the Kubernetes API returns it.

    Returns:
        The condition dict (`type`, `status`, `reason`, `message`, ...), or None when
        the controller has not written one yet.
    """
    conditions = (obj.get("status") or {}).get("conditions") or []
    true = [c for c in conditions if str(c.get("status", "")).lower() == "true"]
    return dict(true[-1]) if true else None


def describe(obj: Mapping[str, Any]) -> str:
    """`Experiment ns/name` for messages."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "?")
    return f"{obj.get('kind', 'object')} {ns + '/' if ns else ''}{name}"


def _condition_text(cond: Mapping[str, Any] | None) -> str:
    if cond is None:
        return "none yet"
    parts = [str(cond.get("type", "?"))]
    if cond.get("reason"):
        parts.append(f"({cond['reason']})")
    text = " ".join(parts)
    message = " ".join(str(cond.get("message") or "").split())
    return f"{text}: {message}" if message else text


def wait_for(
    get: Callable[[], dict[str, Any]],
    *,
    succeeded: Sequence[str] = ("Succeeded",),
    failed: Sequence[str] = ("Failed",),
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_status: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Poll an object until its last True condition is a success or failure type.

    Args:
        get: Returns the object (a dict as `CustomObjectsApi.get_namespaced_custom_object`
            does); errors it raises propagate.
        succeeded: Condition types that end the wait successfully.
        failed: Condition types that end the wait with `KubeflowJobError`.
        timeout_s: Seconds to wait in all (> 0).
        poll_s: Seconds between polls (> 0).
        clock: Monotonic clock, seconds.
        sleep: Sleeps the given seconds.
        on_status: Called with each polled object (progress lines).

    Returns:
        The final object, its last True condition being one of `succeeded`.

    Raises:
        KubeflowJobError: The object failed (its reason and message quoted) or the
            timeout passed (the object and its last condition named).
        ValueError: `timeout_s` or `poll_s` is not positive.
    """

    def finished(obj: dict[str, Any]) -> bool:
        if on_status is not None:
            on_status(obj)
        cond = last_true_condition(obj)
        kind = cond.get("type") if cond else None
        if kind in failed:
            raise KubeflowJobError(f"{describe(obj)} failed: {_condition_text(cond)}")
        return kind in succeeded

    return wait_until(
        get,
        finished,
        what="did not finish",
        timeout_s=timeout_s,
        poll_s=poll_s,
        clock=clock,
        sleep=sleep,
    )


def wait_until(
    get: Callable[[], dict[str, Any]],
    done: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll until `done(object)`; e.g. until a controller has acted on an edit.

    Raises:
        KubeflowJobError: Not done within `timeout_s`: the object, `what` (e.g. `did not
            finish`) and its last condition; or whatever `done` raises.
        ValueError: `timeout_s` or `poll_s` is not positive.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    if not poll_s > 0:
        raise ValueError(f"poll_s must be > 0, got {poll_s!r}")
    deadline = clock() + timeout_s
    while True:
        obj = get()
        if done(obj):
            return obj
        remaining = deadline - clock()
        if remaining <= 0:
            raise KubeflowJobError(
                f"{describe(obj)} {what} within {timeout_s:g}s "
                f"(last condition: {_condition_text(last_true_condition(obj))})"
            )
        sleep(min(poll_s, remaining))
