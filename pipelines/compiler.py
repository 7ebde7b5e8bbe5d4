"""Compile the pipeline for a target into a pipeline spec YAML (no TensorFlow is imported)."""

import re
from pathlib import Path

from pipelines.pipeline import build_pipeline
from pipelines.settings import Settings
from pipelines.templates import TARGET_MARK

_SDK_VERSION = re.compile(r"^sdkVersion: .*$", re.MULTILINE)


def compile_pipeline(target: str, settings: Settings, output_path: str | Path) -> str:
    """Write the compiled pipeline spec for `target` to `output_path`; return the path."""
    from kfp import compiler

    output = Path(output_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(build_pipeline(target, settings), str(output))
    output.write_text(f"{TARGET_MARK}{target}\n{output.read_text()}")  # `submit` checks it
    return str(output)


def normalize_spec(text: str) -> str:
    """A compiled spec without run-to-run noise, for golden tests.

    Drops the SDK version and kfp's leading comment block (it prints parameter
    defaults with an unstable dict order); the YAML body itself is sorted.
    """
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return _SDK_VERSION.sub("sdkVersion: <normalized>", "".join(lines))
