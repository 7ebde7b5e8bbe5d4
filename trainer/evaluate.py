"""Score an exported model on a prepared split through its serving signature (bytes in).

`python -m trainer.evaluate --model_dir M --data_dir D --result R` writes the report
as JSON to R: the evaluation step runs it as a process of its own (`step_process`).
It scores the test split only, so its figures are named for it: `test_accuracy`,
`test_loss` (the trainer's history holds `train_*` and `val_*`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from trainer.gc_pause import collector_paused

with collector_paused():  # a fresh step process: TensorFlow's import 0.3-0.4 s sooner
    import numpy as np
    import tensorflow as tf
    from sklearn import metrics as skm

    from trainer import data, records


def predict_split(
    model_dir: str, data_dir: str, split: str, batch_size: int = 64
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Run a split through the serving signature as PNG bytes, as a Vertex request would carry.

    Returns:
        (probabilities [N, K], true labels [N], dataset metadata).
    """
    metadata = records.read_metadata(data_dir)
    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    probabilities, labels = [], []
    for images, batch_labels in data.read_split(data_dir, metadata, split).batch(batch_size):
        encoded = tf.map_fn(tf.io.encode_png, images, fn_output_signature=tf.string)
        probabilities.append(serve(image_bytes=encoded)["probabilities"].numpy())
        labels.append(batch_labels.numpy())
    if not labels:
        raise records.DatasetError(f"{data_dir}: the {split} split is empty")
    return np.concatenate(probabilities), np.concatenate(labels), metadata


def classification_report(
    probabilities: np.ndarray, labels: np.ndarray, class_names: list[str]
) -> dict[str, Any]:
    """Test accuracy, log loss, per-class precision/recall/F1, confusion matrix, ROC (2 classes)."""
    k = len(class_names)
    predicted = probabilities.argmax(axis=1)
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        labels, predicted, labels=list(range(k)), zero_division=0
    )
    report: dict[str, Any] = {
        "count": int(labels.size),
        "test_accuracy": float((predicted == labels).mean()),
        "test_loss": float(skm.log_loss(labels, probabilities, labels=list(range(k)))),
        "class_names": list(class_names),
        "per_class": {
            name: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, name in enumerate(class_names)
        },
        "confusion_matrix": skm.confusion_matrix(labels, predicted, labels=list(range(k))).tolist(),
    }
    if k == 2 and len(set(labels.tolist())) == 2:
        fpr, tpr, thresholds = skm.roc_curve(labels, probabilities[:, 1])
        report["roc"] = {
            "fpr": fpr.tolist(),
            "tpr": tpr.tolist(),
            "thresholds": [min(float(t), 1.0) for t in thresholds],  # the first: inf
            "auc": float(skm.auc(fpr, tpr)),
        }
    return report


def evaluate_model(model_dir: str, data_dir: str) -> dict[str, Any]:
    """Predict the test split through the serving signature and summarise the classification."""
    probabilities, labels, metadata = predict_split(model_dir, data_dir, "test")
    report = classification_report(probabilities, labels, metadata["class_names"])
    report["split"] = "test"
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate and write the report to `--result` (JSON); errors propagate (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m trainer.evaluate", description=__doc__)
    parser.add_argument("--model_dir", required=True, help="the exported SavedModel")
    parser.add_argument("--data_dir", required=True, help="the prepared dataset")
    parser.add_argument("--result", required=True, help="local file for the report (JSON)")
    args = parser.parse_args(argv)
    report = evaluate_model(args.model_dir, args.data_dir)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    from trainer.quick_exit import exit_without_teardown

    exit_without_teardown(main())
