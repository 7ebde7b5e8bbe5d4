"""A cached trial's cost from its two parts: the frozen part, measured once, and its own.

The cost metrics (`trainer/cost_metrics.py`) describe the whole serving model, which
depends on the architecture, not on the trained weights. So the features step measures
the frozen part once per entry (model, weights, image size, precision, frozen depth: the
entry's keys) and stores it in the entry's metadata (`STORED_KEY`); an HPT trial that
trained on the entry measures only its own part (the layers above the frozen depth) and
reports, without building the backbone:

* `model_size_mb` = (the frozen part's variable bytes + the own part's) / 1e6. Exact: the
  whole serving model's variables are those of the two parts, all float32 as exported.
  The frozen part's bytes are the whole model's less its trainable part's, both taken
  from one float32 build in the features step.
* `latency_ms` = the frozen part's latency + the own part's: the median of `TIMED_CALLS`
  calls of the serving function cut at the boundary (encoded bytes → decode, resize,
  preprocessing, the frozen blocks, for a frozen backbone the pooling) plus the median of
  the own part's calls (features → the trained layers → softmax, class id, label), each
  on one image in float32, after the warm-up calls. A sum, not one whole-model figure,
  because the own part's shape is the trial's (`num_units` is a hyperparameter); it adds
  one function call's overhead (tens of microseconds) and leaves out no work.

A stored cost is used only when it describes this trial's frozen part (model, image
shape, depth, format) and was measured on this kind of host (`host_signature`: CPU model,
CPU count, GPU names); otherwise the trial measures the whole model as before and says
why in one line.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from typing import Any

STORED_KEY = "frozen_part_cost"  # the entry metadata's key
FORMAT = 1
MEASURED = (
    "the serving function cut at the frozen depth (encoded bytes -> decode, resize, "
    "preprocessing, frozen blocks, pooling at the whole backbone), float32, one image"
)


def host_signature() -> dict[str, Any]:
    """What a latency depends on here: the CPU's model, the CPUs usable, the GPUs' names."""
    import tensorflow as tf

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                cpu,
            )
    except OSError:
        pass
    gpus = [
        str(tf.config.experimental.get_device_details(d).get("device_name", d.name))
        for d in tf.config.list_physical_devices("GPU")
    ]
    return {"cpu": cpu, "cpus": len(os.sched_getaffinity(0)), "gpus": gpus}


def measure_frozen_parts(
    spec: Any, image_shape: Sequence[int], num_classes: int, depths: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """The frozen part's stored cost at each of `depths` (one float32 build, random weights).

    Weights do not change a part's size or its arithmetic, so the backbone is built
    without loading any.
    """
    import tensorflow as tf

    from trainer import cost_metrics, export, frozen, preprocess, stages
    from trainer.models import build_model

    shape = [int(d) for d in image_shape]
    host = host_signature()
    with stages.float32_build():
        model = build_model(spec, {}, "none", shape, num_classes, "float32")
        whole = sum(_bytes(model.variables))
        found = {}
        for depth in depths:
            prefix = frozen.prefix_model(model, spec, [depth])
            own = frozen.trainable_part(model, spec, depth, "float32")

            @tf.function(
                input_signature=[tf.TensorSpec([None], tf.string, name=export.SERVING_INPUT)],
                autograph=False,
            )
            def serve(image_bytes: tf.Tensor, prefix: Any = prefix) -> dict[str, tf.Tensor]:
                images = tf.map_fn(
                    lambda b: preprocess.decode_and_resize(b, shape),
                    image_bytes,
                    fn_output_signature=tf.TensorSpec(shape, tf.uint8),
                )
                return {"class_id": prefix(tf.cast(images, tf.float32) / 255.0, training=False)}

            found[depth] = {
                "format": FORMAT,
                "model": spec.name,
                "image_shape": shape,
                "frozen_depth": int(depth),
                "variable_bytes": whole - sum(_bytes(own.variables)),
                "latency_ms": cost_metrics.latency_ms(serve, cost_metrics.probe_image(shape)),
                "measured": MEASURED,
                "host": host,
                "host_name": platform.node(),
            }
    return found


def _bytes(variables: Sequence[Any]) -> list[int]:
    import math

    import tensorflow as tf

    return [math.prod(int(d) for d in v.shape) * tf.as_dtype(v.dtype).size for v in variables]


def stored(
    cost: Mapping[str, Any] | None, model: str, image_shape: Sequence[int], depth: int
) -> tuple[Mapping[str, Any] | None, str]:
    """(cost, "") if it is this frozen part's, from this kind of host; else (None, why)."""
    if not cost:
        return None, "the feature entry holds no frozen-part cost"
    expected = {
        "format": FORMAT,
        "model": model,
        "image_shape": [int(d) for d in image_shape],
        "frozen_depth": int(depth),
    }
    differ = [f"{k}: {cost.get(k)!r} != {v!r}" for k, v in expected.items() if cost.get(k) != v]
    if differ:
        return None, f"the stored frozen-part cost is another part's ({'; '.join(differ)})"
    here = host_signature()
    if cost.get("host") != here:
        return None, f"the frozen-part cost was measured on another host ({cost.get('host')})"
    return cost, ""


def own_part_float32(part: Any) -> Any:
    """A float32, undistributed copy of the trained part (`part`: the model that trained)."""
    import keras

    from trainer import stages

    def as_float32(layer: Any) -> Any:
        if not isinstance(layer, keras.layers.Layer):  # a bare op (hard-swish's add): no state
            return layer
        return layer.__class__.from_config({**layer.get_config(), "dtype": "float32"})

    with stages.float32_build():
        inputs = keras.Input(shape=part.input.shape[1:], dtype="float32", name="features")
        copy = keras.models.clone_model(
            part, input_tensors=inputs, clone_function=as_float32, recursive=True
        )
    copy.set_weights(part.get_weights())
    return copy


def measure(cost: Mapping[str, Any], part: Any, class_names: Sequence[str]) -> dict[str, float]:
    """`COST_METRICS` of the whole serving model: `cost` (stored) + the own part's, measured."""
    import numpy as np
    import tensorflow as tf

    from trainer import cost_metrics
    from trainer.contract import COST_METRICS

    own = own_part_float32(part)
    names = tf.constant(list(class_names))

    @tf.function(autograph=False)
    def serve(features: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = tf.nn.softmax(own(features, training=False), axis=-1)
        class_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"class_id": class_id, "label": tf.gather(names, class_id)}

    shape = [1, *(int(d) for d in own.input.shape[1:])]
    probe = tf.constant(np.random.default_rng(0).random(shape, dtype=np.float32))
    costs = {
        "model_size_mb": (int(cost["variable_bytes"]) + sum(_bytes(own.variables))) / 1e6,
        "latency_ms": float(cost["latency_ms"]) + cost_metrics.latency_ms(serve, probe),
    }
    assert tuple(costs) == COST_METRICS
    return costs
