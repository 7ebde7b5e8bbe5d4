"""A trial's cost, measured once after training: the model's size and its serving latency.

* `model_size_mb`: the bytes of the exported model's variables (the serving model's
  float32 weights, what the SavedModel's `variables/` holds, give or take its index),
  in MB (10^6 bytes). Read from the variables' shapes: nothing is written or read back.
* `latency_ms`: the median wall time of one call of the serving function (encoded bytes
  in: decode, resize, the model, softmax, label) on one image, on this process's own
  hardware, after `WARMUP_CALLS` calls; `TIMED_CALLS` calls are timed. The image is a PNG
  of the study's image size (seeded noise). The serving function is the one the export
  saves, traced once for both (measuring adds the calls, not a second trace).

A team's builder may add metrics of its own: a callable attribute `hpt_metrics` on the
builder function, `build.hpt_metrics = fn`, called once with the trained Keras model
and returning `{tag: number}`; every tag is reported beside these (`measure`).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainer.contract import COST_METRICS, METRIC_GOALS, ContractError

WARMUP_CALLS = 3
TIMED_CALLS = 15
BUILDER_METRICS_ATTRIBUTE = "hpt_metrics"
_TAG = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def model_size_mb(variables: Sequence[Any]) -> float:
    """The bytes of `variables` (shape x dtype size), in MB."""
    import tensorflow as tf

    total = sum(math.prod(int(d) for d in v.shape) * tf.as_dtype(v.dtype).size for v in variables)
    return total / 1e6


def probe_image(image_shape: Sequence[int], seed: int = 0) -> Any:
    """One encoded PNG of `image_shape` (seeded noise), as the serving input `[1]` bytes."""
    import numpy as np
    import tensorflow as tf

    pixels = np.random.default_rng(seed).integers(0, 256, size=tuple(image_shape), dtype=np.uint8)
    return tf.reshape(tf.io.encode_png(pixels), [1])


def latency_ms(
    serve: Callable[[Any], Mapping[str, Any]],
    image_bytes: Any,
    *,
    warmup: int = WARMUP_CALLS,
    timed: int = TIMED_CALLS,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The median milliseconds of `serve(image_bytes)`, after `warmup` untimed calls.

    Each timed call waits for its result on the host (`.numpy()`), so asynchronous
    devices are timed to completion.
    """
    for _ in range(warmup):
        serve(image_bytes)["class_id"].numpy()
    times = []
    for _ in range(timed):
        started = clock()
        serve(image_bytes)["class_id"].numpy()
        times.append((clock() - started) * 1000.0)
    return float(statistics.median(times))


def builder_metrics(builder: Any, model: Any) -> dict[str, float]:
    """The metrics a builder's `hpt_metrics(model)` reports (empty without the attribute).

    Raises:
        ContractError: It did not return `{tag: finite number}`, or a tag is the trainer's own.
    """
    hook = getattr(builder, BUILDER_METRICS_ATTRIBUTE, None)
    if hook is None:
        return {}
    where = f"{getattr(builder, '__name__', 'builder')}.{BUILDER_METRICS_ATTRIBUTE}"
    values = hook(model)
    if not isinstance(values, Mapping):
        raise ContractError(f"{where} returned {type(values).__name__}, expected {{tag: number}}")
    out: dict[str, float] = {}
    for tag, value in values.items():
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise ContractError(f"{where}: tag {tag!r}, expected a letter then letters/digits/_")
        if tag in METRIC_GOALS:
            raise ContractError(f"{where}: tag {tag} is the trainer's own (rename it)")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ContractError(f"{where}: {tag}={value!r}, expected a finite number")
        out[tag] = float(value)
    return out


def measure(
    serve: Callable[[Any], Mapping[str, Any]],
    variables: Sequence[Any],
    image_shape: Sequence[int],
    builder: Any = None,
    model: Any = None,
) -> dict[str, float]:
    """`COST_METRICS` of a serving function and its variables, then the builder's own."""
    costs = {
        "model_size_mb": model_size_mb(variables),
        "latency_ms": latency_ms(serve, probe_image(image_shape)),
    }
    assert tuple(costs) == COST_METRICS
    return {**costs, **builder_metrics(builder, model)}
