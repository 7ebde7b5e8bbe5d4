"""Render an evaluation report (from trainer.evaluate) as PNG figures and one HTML page."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from pipelines.reports import plotting


def _figure_png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


SHORT_NAME = 3  # class names up to this long stay level under the confusion matrix


def count_colors(matrix: list[list[int]]) -> list[list[str]]:
    """The colour of each count: white on the darker half of the Blues scale, else black."""
    top = max((max(row) for row in matrix if row), default=0)
    return [["white" if top and count > top / 2 else "black" for count in row] for row in matrix]


def confusion_matrix_figure(report: dict[str, Any]) -> Any:
    """A confusion-matrix heat map with counts, readable on light and dark cells alike."""
    plt = plotting.pyplot()

    names, matrix = report["class_names"], report["confusion_matrix"]
    family = plotting.font_for([str(n) for n in names])
    if family is None:  # the stated fallback: numbered labels, the page names each class
        names = plotting.label_stand_ins([str(n) for n in names])
    size = max(3.0, 0.5 * len(names) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
    if family is not None:
        ax.tick_params(labelfontfamily=family)
    ax.imshow(matrix, cmap="Blues", vmin=0)
    if max((len(str(n)) for n in names), default=0) <= SHORT_NAME:
        ax.set_xticks(range(len(names)), names)
    else:
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for i, (row, colors) in enumerate(zip(matrix, count_colors(matrix), strict=True)):
        for j, (count, color) in enumerate(zip(row, colors, strict=True)):
            ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color=color)
    ax.set_title(f"confusion matrix ({report['split']}, n={report['count']})")
    return fig


def confusion_matrix_png(report: dict[str, Any]) -> bytes:
    """`confusion_matrix_figure` as PNG bytes."""
    fig = confusion_matrix_figure(report)
    png = _figure_png(fig)
    plotting.pyplot().close(fig)
    return png


def roc_png(report: dict[str, Any]) -> bytes:
    """The ROC curve of a two-class report."""
    plt = plotting.pyplot()

    roc = report["roc"]
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot(roc["fpr"], roc["tpr"], label=f"AUC = {roc['auc']:.3f}")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(loc="lower right")
    png = _figure_png(fig)
    plt.close(fig)
    return png


def write_report(report: dict[str, Any], out_dir: str | Path, title: str = "Evaluation") -> Path:
    """Write confusion_matrix.png (+ roc.png) and index.html into `out_dir`; return the page."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images = {"confusion_matrix.png": confusion_matrix_png(report)}
    if "roc" in report:
        images["roc.png"] = roc_png(report)
    for name, png in images.items():
        (out / name).write_bytes(png)
    numbered = plotting.font_for([str(n) for n in report["class_names"]]) is None
    rows = "".join(
        f"<tr><td>{f'#{i} ' if numbered else ''}{html.escape(name)}</td>"
        f"<td>{m['precision']:.3f}</td><td>{m['recall']:.3f}</td>"
        f"<td>{m['f1']:.3f}</td><td>{m['support']}</td></tr>"
        for i, (name, m) in enumerate(report["per_class"].items())
    )
    figures = "".join(
        f'<img alt="{name}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        for name, png in images.items()
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:4px 10px;text-align:right}}
img{{margin:1em;max-width:45%}}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>split <b>{html.escape(report["split"])}</b>, {report["count"]} images:
test_accuracy <b>{report["test_accuracy"]:.4f}</b>,
test_loss (log loss) {report["test_loss"]:.4f}</p>
<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th><th>support</th></tr>
{rows}</table>{figures}</body></html>"""
    path = out / "index.html"
    path.write_text(page)
    return path


def vertex_model_evaluation(report: dict[str, Any]) -> dict[str, Any]:
    """The report in the file format GCPC's model-evaluation import reads.

    One overall slice whose `metrics.classification` follows Vertex's
    `classification_metrics_1.0.0` schema (log loss, confusion matrix, AUC ROC).
    """
    classification: dict[str, Any] = {
        "logLoss": report["test_loss"],
        "confusionMatrix": {
            "annotationSpecs": [
                {"id": str(i), "displayName": name} for i, name in enumerate(report["class_names"])
            ],
            "rows": report["confusion_matrix"],
        },
    }
    if "roc" in report:
        classification["auRoc"] = report["roc"]["auc"]
    return {
        "slicedMetrics": [
            {"singleOutputSlicingSpec": {}, "metrics": {"classification": classification}}
        ]
    }
