"""Compile the pipeline for a target into a pipeline spec YAML (no TensorFlow is imported)."""

from pathlib import Path

from pipelines.pipeline import build_pipeline
from pipelines.settings import Settings
from pipelines.templates import TARGET_MARK


def compile_pipeline(target: str, settings: Settings, output_path: str | Path) -> str:
    """Write the compiled pipeline spec for `target` to `output_path`; return the path."""
    from kfp import compiler

    pipeline = build_pipeline(target, settings)  # a refused setting leaves no folder behind
    output = Path(output_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(output))
    output.write_text(f"{TARGET_MARK}{target}\n{output.read_text()}")  # `submit` checks it
    return str(output)
