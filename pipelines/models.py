"""The model a run's settings name, as the pipeline sees it: its spec, checked without TensorFlow.

A catalogued model's spec is read from `trainer.models` (TF-free). A team's own
builder (`package.module:function`) is imported and built in a process of its own
(`python -m trainer.models.custom`), so compiling never imports TensorFlow here; its
module must be importable for `run`, and for `compile`/`submit` it is checked
wherever it is importable (else the trainer checks it when a trial starts).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys

from trainer.contract import ContractError
from trainer.models import MODELS, ModelSpec, is_reference, model_spec
from trainer.models.custom import NOT_IMPORTABLE, REFERENCE

CHECK_TIMEOUT_S = 300


@dataclasses.dataclass(frozen=True)
class KnownModel:
    """A model's spec and whether its own hyperparameters are known here.

    Attributes:
        spec: The spec (for an unimportable reference: no hyperparameters of its own).
        checked: False when a reference's module is not importable on this machine.
        note: One line saying why it was not checked, else empty.
    """

    spec: ModelSpec
    checked: bool = True
    note: str = ""


@functools.lru_cache(maxsize=16)
def describe_model(model: str, image_size: int, channels: int = 3) -> KnownModel:
    """The spec of `model`, a catalogue name or a reference built once in a fresh process.

    Raises:
        ContractError: An unknown name, or a reference that is unusable, in one line.
    """
    if model in MODELS or not is_reference(model):
        return KnownModel(model_spec(model))
    if not REFERENCE.match(model):
        raise ContractError(f"model={model!r}: expected package.module:function")
    command = [
        sys.executable,
        "-m",
        "trainer.models.custom",
        model,
        f"--image-size={image_size}",
        f"--channels={channels}",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise ContractError(
            f"model={model}: building it took over {CHECK_TIMEOUT_S} s (checked in a process)"
        ) from None
    if done.returncode == NOT_IMPORTABLE:
        line = done.stderr.strip().splitlines()[-1]
        spec = ModelSpec(name=model, builder=model)
        return KnownModel(spec, checked=False, note=line)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise ContractError(lines[-1])
    return KnownModel(ModelSpec.from_json(json.loads(done.stdout.strip().splitlines()[-1])))
