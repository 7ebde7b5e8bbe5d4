"""Compile the pipeline for a target into a pipeline spec YAML (no TensorFlow is imported)."""

from pathlib import Path
from typing import Any

from pipelines.pipeline import build_pipeline
from pipelines.plan import RunPlan
from pipelines.settings import Settings
from pipelines.templates import TARGET_MARK


def compile_pipeline(target: str, plan: RunPlan | Settings, output_path: str | Path) -> str:
    """Write the compiled pipeline spec for `target` to `output_path`; return the path."""
    pipeline = build_pipeline(target, plan)  # a refused setting leaves no folder behind
    return write_spec(pipeline, target, output_path)


def write_spec(pipeline: Any, target: str, output_path: str | Path) -> str:
    """Write a pipeline `build_pipeline(target, …)` built as its spec YAML; return the path."""
    from kfp import compiler

    output = Path(output_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(output))
    output.write_text(f"{TARGET_MARK}{target}\n{output.read_text()}")  # `submit` checks it
    return str(output)
