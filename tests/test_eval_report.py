"""The evaluation report's confusion matrix reads on dark cells and under short class names."""

from __future__ import annotations

from pipelines.reports import eval_report, plotting


def _report(names: list[str], matrix: list[list[int]]) -> dict:
    return {
        "class_names": names,
        "confusion_matrix": matrix,
        "split": "test",
        "count": sum(map(sum, matrix)),
    }


def test_counts_on_dark_cells_are_white():
    matrix = [[18, 0, 1], [2, 17, 0], [0, 10, 9]]
    assert eval_report.count_colors(matrix) == [
        ["white", "black", "black"],
        ["black", "white", "black"],
        ["black", "white", "black"],  # 9 is half of 18: still light
    ]
    assert eval_report.count_colors([[0, 0], [0, 0]]) == [["black"] * 2] * 2  # nothing is dark

    fig = eval_report.confusion_matrix_figure(_report(["0", "1", "2"], matrix))
    try:
        (ax,) = fig.axes
        drawn = {(t.get_text(), t.get_color()) for t in ax.texts}
        assert ("18", "white") in drawn and ("0", "black") in drawn
        # short class names stay level, under their column
        assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    finally:
        plotting.pyplot().close(fig)


def test_long_class_names_are_slanted():
    fig = eval_report.confusion_matrix_figure(_report(["horses", "humans"], [[5, 1], [0, 6]]))
    try:
        assert {t.get_rotation() for t in fig.axes[0].get_xticklabels()} == {45.0}
    finally:
        plotting.pyplot().close(fig)


def test_confusion_rows_are_the_true_class_in_the_report_and_in_vertexs_evaluation():
    """Vertex's `classification_metrics` schema: rows[i][j] counts true i predicted j."""
    import numpy as np

    from trainer.evaluate import classification_report

    labels = np.array([0, 0, 0, 1, 2])  # three cats: one seen as a cat, two as dogs
    predicted = [0, 1, 1, 1, 2]
    probabilities = np.eye(3)[predicted] * 0.8 + 0.2 / 3
    report = classification_report(probabilities, labels, ["cat", "dog", "bird"])
    assert report["confusion_matrix"] == [[1, 2, 0], [0, 1, 0], [0, 0, 1]]
    assert report["per_class"]["cat"]["recall"] == 1 / 3
    report.update(split="test")
    vertex = eval_report.vertex_model_evaluation(report)
    matrix = vertex["slicedMetrics"][0]["metrics"]["classification"]["confusionMatrix"]
    assert [s["displayName"] for s in matrix["annotationSpecs"]] == ["cat", "dog", "bird"]
    assert matrix["rows"] == [[1, 2, 0], [0, 1, 0], [0, 0, 1]]
