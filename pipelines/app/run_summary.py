"""The end-of-run summary of a local pipeline run (Rich tables in the terminal)."""

from typing import Any


def _artifact(tasks: dict[str, Any], task: str, name: str) -> dict[str, Any]:
    artifacts = tasks.get(task, {}).get("artifacts", {}).get(name, {}).get("artifacts", [])
    return artifacts[0] if artifacts else {}


def _parameter(tasks: dict[str, Any], task: str, name: str) -> Any:
    return tasks.get(task, {}).get("parameterValues", {}).get(name)


def _page(folder: str | None) -> str | None:
    return f"{folder.rstrip('/')}/index.html" if folder else None


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Pull the headline facts of a run out of its task outputs."""
    tasks = result["tasks"]
    trials = _artifact(tasks, "tune-locally", "trials")
    model = _artifact(tasks, "train-locally", "model")
    metrics = _artifact(tasks, "evaluate-model", "metrics")
    registered = _artifact(tasks, "register-locally", "registered")
    selection = _artifact(tasks, "select-best-trial", "summary").get("metadata", {})
    features = _artifact(tasks, "features-locally", "features").get("metadata", {})
    return {
        "features": _features_line(features),
        "best_trial_id": _parameter(tasks, "select-best-trial", "best_trial_id"),
        "best_parameters": _parameter(tasks, "select-best-trial", "best_parameters") or {},
        "best_metric": _parameter(tasks, "select-best-trial", "best_metric"),
        "why": selection.get("why"),  # the pick, its front and constraints (selection.py)
        "at_chance": selection.get("at_chance") or "",  # the pick learnt nothing (selection.py)
        "pareto_front": selection.get("pareto_front") or [],
        "constraints": selection.get("constraints") or [],
        "trials": trials.get("uri"),
        "trial_states": trials.get("metadata", {}).get("states", {}),
        "trial_outcomes": trials.get("metadata", {}).get("outcomes"),  # the taxonomy's words
        "study": trials.get("metadata", {}).get("study"),
        "mlflow": _mlflow_line(trials.get("metadata", {})),
        "model": model.get("uri"),
        "test_metrics": {
            k: v for k, v in metrics.get("metadata", {}).items() if isinstance(v, int | float)
        },
        "passed": _parameter(tasks, "evaluate-model", "Output"),
        "report": result.get("trial_report"),  # the study's page, as `trials RUN` writes it
        # The figures folder's index.html is the same page as the `report` artifact, whose
        # file has no extension (kfp names it), so a browser would show it as text.
        "evaluation": _page(_artifact(tasks, "evaluate-model", "figures").get("uri")),
        "figures": _artifact(tasks, "evaluate-model", "figures").get("uri"),
        "registered": registered.get("uri"),
        "version": registered.get("metadata", {}).get("version"),
        "reused": registered.get("metadata", {}).get("reused"),  # the same model, registered
        "run_dir": result["run_dir"],
        "log": result["log"],
        "seconds": result["seconds"],
    }


def _mlflow_line(meta: dict[str, Any]) -> str | None:
    """How to see the study's MLflow runs (`pipelines/tracking/`), or None when untracked."""
    if not meta.get("mlflow_run_id"):
        return None
    from pipelines.tracking.store import Store

    return f"{Store(meta['tracking_uri']).ui_command()}  (study run {meta['mlflow_run_id']})"


def _features_line(meta: dict[str, Any]) -> str:
    """The features step in one cell: computed or reused, which depths, how long; or why not."""
    if not meta:
        return "-"
    if meta.get("result") == "skipped":
        return f"skipped: {meta.get('reason', '')}"
    return (
        f"{meta.get('result')} trainable_blocks {meta.get('trainable_blocks')} "
        f"in {float(meta.get('seconds', 0)):.1f} s → {meta.get('features_dir')}"
    )


def show(console: Any, result: dict[str, Any]) -> dict[str, Any]:
    """Print the summary tables; return the summary."""
    from rich.markup import escape
    from rich.table import Table

    s = summarize(result)
    headline = Table(title=f"hpt-pipeline run finished in {s['seconds']:.0f} s", show_header=False)
    headline.add_column(style="bold")
    headline.add_column(overflow="fold")
    counted = s["trial_outcomes"] or s["trial_states"]  # outcomes: artifacts from issue 42 on
    states = ", ".join(f"{n} {state.lower()}" for state, n in counted.items())
    headline.add_row("trials", states or "-")
    headline.add_row("features", s["features"])
    headline.add_row("best trial", f"{s['best_trial_id']} ({s['best_metric']:.4f})")
    if s["why"]:
        headline.add_row("  why", s["why"])
        headline.add_row("  pareto front", ", ".join(map(str, s["pareto_front"])))
    if s["at_chance"]:
        headline.add_row("  warning", f"[red]{escape(s['at_chance'])}[/]")
    if s["constraints"]:
        headline.add_row("  constraints", ", ".join(s["constraints"]))
    for name, value in sorted(s["best_parameters"].items()):
        headline.add_row(f"  {name}", str(value))
    for name in ("test_accuracy", "test_loss", "auc"):
        if name in s["test_metrics"]:
            headline.add_row(name, f"{s['test_metrics'][name]:.4f}")  # the metrics' own names
    if s["passed"]:
        again = " (the same model: already registered, nothing new)" if s["reused"] else ""
        headline.add_row("registered", f"v{s['version']} at {s['registered']}{again}")
    else:
        headline.add_row("registered", "[red]no: the model missed the evaluation threshold[/]")
    for name in ("model", "trials", "study", "report", "evaluation", "figures", "run_dir", "log"):
        headline.add_row(name.replace("_", " "), str(s[name]))
    headline.add_row("mlflow", s["mlflow"] or "not tracked")
    from pipelines.app import formats

    formats.print_table(headline, console.file)  # piped: whole, a path never broken mid-word
    return s
