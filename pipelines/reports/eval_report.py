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


def confusion_matrix_png(report: dict[str, Any]) -> bytes:
    """A confusion-matrix heat map with counts."""
    plt = plotting.pyplot()

    names, matrix = report["class_names"], report["confusion_matrix"]
    size = max(3.0, 0.5 * len(names) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center", fontsize=8)
    ax.set_title(f"confusion matrix ({report['split']}, n={report['count']})")
    png = _figure_png(fig)
    plt.close(fig)
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
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{m['precision']:.3f}</td><td>{m['recall']:.3f}</td>"
        f"<td>{m['f1']:.3f}</td><td>{m['support']}</td></tr>"
        for name, m in report["per_class"].items()
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
accuracy <b>{report["accuracy"]:.4f}</b>, log loss {report["loss"]:.4f}</p>
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
        "logLoss": report["loss"],
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
