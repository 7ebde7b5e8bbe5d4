"""Evaluate the exported model on the test split; gate registration on the threshold."""

from kfp import dsl

from components.base import component


@component
def evaluate_model(
    model: dsl.Input[dsl.Model],
    dataset: dsl.Input[dsl.Dataset],
    threshold: float,
    use_threshold: bool,
    trials: dsl.Input[dsl.Artifact],
    best_trial_id: str,
    metrics: dsl.Output[dsl.Metrics],
    classification: dsl.Output[dsl.ClassificationMetrics],
    report: dsl.Output[dsl.HTML],
    figures: dsl.Output[dsl.Artifact],
) -> bool:
    """Score the test split through the serving signature; return whether it may be registered.

    Logs test_accuracy, test_loss and per-class precision/recall/F1 (Metrics), the
    confusion matrix and, for two classes, the ROC curve (ClassificationMetrics),
    and the same figures as one HTML page (`report`, drawn by the console) and
    as PNG files with evaluation.json (`figures`). When the study was tracked (its `trials`
    artifact names the MLflow store and study run), the final job gets a run there, whose id
    the metrics' metadata keep (`tracking`) for the registry.
    """
    import json
    import os
    import threading

    from pipelines.jobs import step_process, trainer_args
    from pipelines.reports import eval_report, plotting
    from pipelines.tracking.steps import FinalTracking

    tracker = FinalTracking(trials.metadata)  # its writer warms up while the model is scored

    # matplotlib's import (~0.3 s), for the figures, runs while the evaluation process does.
    loading = threading.Thread(target=plotting.pyplot, name="matplotlib", daemon=True)
    loading.start()
    # TensorFlow's half in a process of its own: forked from the run's preloaded process
    # in a local run, started afresh in this image elsewhere (see step_process).
    result = step_process.run_module(
        "trainer.evaluate",
        [
            f"--model_dir={trainer_args.artifact_location(model)}",
            f"--data_dir={trainer_args.artifact_location(dataset)}",
        ],
    )
    loading.join()
    metrics.log_metric("test_accuracy", result["test_accuracy"])
    metrics.log_metric("test_loss", result["test_loss"])
    metrics.log_metric("test_examples", result["count"])
    for name, per_class in result["per_class"].items():
        for key in ("precision", "recall", "f1"):
            metrics.log_metric(f"{key}_{name}", per_class[key])
    classification.log_confusion_matrix(result["class_names"], result["confusion_matrix"])
    with open(metrics.path, "w") as f:  # the file Vertex's model-evaluation import reads
        json.dump(eval_report.vertex_model_evaluation(result), f)
    if "roc" in result:
        roc = result["roc"]
        classification.log_roc_curve(roc["fpr"], roc["tpr"], roc["thresholds"])
        metrics.log_metric("auc", roc["auc"])
    passed = (not use_threshold) or result["test_accuracy"] >= float(threshold)
    metrics.metadata.update(
        {"model": model.uri, "dataset": dataset.uri, "passed_threshold": passed}
    )
    if use_threshold:
        metrics.log_metric("threshold", float(threshold))
    tracked = tracker.record(
        params=model.metadata.get("hyperparameters", {}),
        metrics={k: v for k, v in metrics.metadata.items() if isinstance(v, int | float)},
        tags={
            "hpt.best_trial_id": best_trial_id,
            "hpt.model": model.uri,
            "hpt.passed_threshold": str(passed).lower(),
        },
    )
    if tracked:
        metrics.metadata["tracking"] = tracked
    page = eval_report.write_report(result, figures.path, title="Evaluation of the retrained model")
    with open(report.path, "w") as f:
        f.write(page.read_text())
    with open(os.path.join(figures.path, "evaluation.json"), "w") as f:
        json.dump(result, f, indent=2)
    if not passed:
        accuracy = result["test_accuracy"]
        print(f"model NOT registered: test_accuracy {accuracy:.4f} < threshold {threshold}")
    return passed
