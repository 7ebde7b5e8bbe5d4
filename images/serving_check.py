"""Check that an export loads and serves in the serving container's TensorFlow version.

`python images/serving_check.py export MODEL_DIR` (project venv, TF 2.21) writes PNG
inputs and the export's outputs for them; `python images/serving_check.py serve MODEL_DIR`
run by a Python with the serving container's TensorFlow (`make serving-check` makes one
from `pipelines.images.SERVING_CONTAINERS`) loads the SavedModel, calls
`serving_default` on the same bytes and fails unless labels match and probabilities
agree to 1e-5. Not part of `make test`: it needs a second TensorFlow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _outputs(model_dir: Path, images: list[bytes]) -> dict[str, list]:
    import tensorflow as tf

    serve = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    result = serve(tf.constant(images))
    return {
        "tensorflow": tf.__version__,
        "probabilities": result["probabilities"].numpy().tolist(),
        "label": [x.decode() for x in result["label"].numpy().tolist()],
    }


def main(argv: list[str]) -> int:
    """`export MODEL_DIR` or `serve MODEL_DIR`; returns the exit code."""
    mode, model_dir = argv[0], Path(argv[1])
    check = model_dir.parent / f"{model_dir.name}.serving-check.json"
    if mode == "export":
        import tensorflow as tf

        shape = json.loads((model_dir / "model.json").read_text())["dataset"]["image_shape"]
        tf.random.set_seed(0)
        pixels = tf.random.uniform([4, *shape[:2], 3], maxval=256, dtype=tf.int32)
        images = [tf.io.encode_png(tf.cast(p, tf.uint8)).numpy() for p in pixels]
        expected = _outputs(model_dir, images)
        check.write_text(json.dumps({"images": [i.hex() for i in images], **expected}))
        print(f"exported outputs with TensorFlow {expected['tensorflow']} to {check}")
        return 0
    data = json.loads(check.read_text())
    got = _outputs(model_dir, [bytes.fromhex(i) for i in data["images"]])
    worst = max(
        abs(a - b)
        for row_a, row_b in zip(got["probabilities"], data["probabilities"], strict=True)
        for a, b in zip(row_a, row_b, strict=True)
    )
    same = got["label"] == data["label"] and worst <= 1e-5
    print(
        f"TensorFlow {got['tensorflow']} serves the TensorFlow {data['tensorflow']} export: "
        f"labels {'match' if got['label'] == data['label'] else 'DIFFER'}, "
        f"largest probability difference {worst:.2e}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
