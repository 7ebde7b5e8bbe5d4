"""Every tunable reaches what it tunes: two values of a hyperparameter never give the same run.

Parametrised over the trainer contract's hyperparameters (`TRAINER_HYPERPARAMETERS`) and each
built-in model's own (`MODELS`), so a hyperparameter is covered the day it is added. Each value
goes in as the flag a trial or the final job gets (`trainer.flags.parse_args`) and is followed
on the paths a run takes: from images, from the frozen backbone's feature cache, and into the
whole model the export saves (with the hyperparameters its model card records, from which a
cached trial's whole model is rebuilt, `trainer.trial_export.hparams_of`).

The trainer's own values are trained with (a few steps at 32 px: the optimizer, its rate and
momentum, the batch and the epochs all change what trained); a model's own values change what
is built (the head's width, the layers that train, the optimizer's slots), so those runs stop
before the first step.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import use_temp_folder
from tests.synthetic import write_dataset
from trainer.contract import OPTIMIZER_ONLY, TRAINER_HYPERPARAMETERS, Hyperparameter
from trainer.models import MODELS

pytestmark = pytest.mark.slow
CACHED = "mobilenet_v3_small"  # the cache path, on the CPU-friendly backbone
# The trainer's values every run starts from (others: their defaults): a few cheap steps that
# still move the weights.
BASE = {"learning_rate": 0.05, "optimizer": "sgd", "momentum": 0.9, "batch_size": 16, "epochs": 1}
CACHED_BASE = {"trainable_blocks": 0}  # a frozen backbone: its trials train the head on features


def other_value(h: Hyperparameter, value: Any) -> Any:
    """Another value `h` accepts: the next choice, one more (or less) unit, or half."""
    if h.kind is str:
        return next(c for c in h.choices if c != value)
    if h.kind is int:
        return value + 1 if h.accepts(value + 1) else value - 1
    return value / 2


def base_of(model: str, path: str) -> dict[str, Any]:
    """The flags' values a run of `model` on `path` starts from (the model's own: defaults)."""
    trainer = {name: h.default for name, h in TRAINER_HYPERPARAMETERS.items()}  # a new one too
    own = {h.name: h.default for h in MODELS[model].hyperparameters}
    return {**trainer, **BASE, **own, **(CACHED_BASE if path == "cache" else {})}


def variant(model: str, path: str, name: str) -> tuple[tuple[str, Any], ...]:
    """The base values with `name` changed (and the optimizer it means something under)."""
    values = base_of(model, path)
    h = {**TRAINER_HYPERPARAMETERS, **MODELS[model].all_hyperparameters()}[name]
    if name in OPTIMIZER_ONLY:
        values["optimizer"] = OPTIMIZER_ONLY[name]
    values[name] = other_value(h, values[name])
    return tuple(sorted(values.items()))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A 32-px dataset and its feature cache for CACHED at trainable_blocks 0 and 1."""
    from trainer import features

    data = write_dataset(str(tmp_path_factory.mktemp("data")), counts=(64, 16, 16))
    cache = str(tmp_path_factory.mktemp("features"))
    args = [f"--data={data}", f"--output={cache}", f"--model={CACHED}", "--weights=none"]
    with pytest.MonkeyPatch.context() as patch:  # TensorFlow's temporary files: ours
        use_temp_folder(tmp_path_factory.mktemp("tmp"), patch)
        assert features.main([*args, "--precision=float32", "--trainable_blocks=0,1"]) == 0
    return {"data": data, "cache": cache}


def parsed(world: dict[str, str], model: str, path: str, values: tuple[tuple[str, Any], ...]):
    """(HParams, RunConfig) from the flags a job would get."""
    from trainer.flags import parse_args

    flags = [f"--data={world['data']}", f"--model={model}", "--precision=float32"]
    flags += ["--weights=none", *(f"--{k}={v}" for k, v in values)]
    if path == "cache":
        flags.append(f"--features={world['cache']}")
    return parse_args(flags)


def exported(hparams: Any, run: Any, result: Any, whole: bool = True) -> dict[str, Any]:
    """What the export gets: the whole model's weights (built: `whole`), the card read back."""
    from trainer import model_card, trial_export

    card = model_card.model_card(hparams, run, result)
    back = trial_export.hparams_of(card, None)
    weights = result.whole_model().get_weights() if whole else []
    return {
        "whole": [np.asarray(w) for w in weights],
        "card": (back.hyperparameters(), back.model_params),
    }


def check_path(result: Any, path: str) -> None:
    """The run took the path it is meant to test (a run meant for the cache did not fall back)."""
    assert (result.source == "images") == (path == "images"), result.source


@functools.cache
def _trained(world_key: tuple[str, str], model: str, path: str, values: tuple) -> dict[str, Any]:
    from trainer import train

    world = dict(zip(("data", "cache"), world_key, strict=True))
    hparams, run = parsed(world, model, path, values)
    result = train.train(hparams, run)
    check_path(result, path)
    return {
        "epochs": len(result.history),
        "trained": [np.asarray(w) for w in result.trained_part()],
        **exported(hparams, run, result),
    }


def trained(world: dict[str, str], model: str, path: str, values: tuple) -> dict[str, Any]:
    """A real run of a few steps (cached per values: the base run is shared)."""
    return _trained((world["data"], world["cache"]), model, path, values)


def differ(a: Any, b: Any) -> bool:
    """Whether two runs' records differ (arrays beyond float noise, shapes, or values)."""
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        if [x.shape for x in a] != [y.shape for y in b]:
            return True
        return any(not np.allclose(x, y, rtol=0, atol=1e-6) for x, y in zip(a, b, strict=True))
    return a != b


TRAINER_PATHS = [("cnn", "images"), (CACHED, "cache")]


@pytest.mark.parametrize("name", sorted(TRAINER_HYPERPARAMETERS))
@pytest.mark.parametrize(("model", "path"), TRAINER_PATHS, ids=[p for _, p in TRAINER_PATHS])
def test_each_trainer_hyperparameter_changes_what_trains_and_what_is_exported(
    world, model, path, name
):
    base = tuple(sorted(base_of(model, path).items()))
    a, b = (
        trained(world, model, path, base),
        trained(world, model, path, variant(model, path, name)),
    )
    assert differ(a["trained"], b["trained"]) or a["epochs"] != b["epochs"], f"--{name} ignored"
    assert differ(a["whole"], b["whole"]), f"--{name} does not reach the exported model"
    assert a["card"] != b["card"], f"--{name} not on the model card"


@functools.cache
def _built(
    world_key: tuple[str, str], model: str, path: str, values: tuple, built_whole: bool
) -> dict[str, Any]:
    """A run stopped before its first step: what it built to train, and what it exports.

    The whole model is built for the base values and when `built_whole` (it is compared).
    """
    from trainer import train

    world = dict(zip(("data", "cache"), world_key, strict=True))
    hparams, run = parsed(world, model, path, values)
    seen: dict[str, Any] = {}

    def before_the_first_step(loop, model, batches, choice, rewrites, on_epoch):
        state = loop._restore(model)  # the loop's optimizer and checkpoint state
        seen["trains"] = [tuple(v.shape) for v in model.trainable_variables]
        seen["slots"] = [tuple(v.shape) for v in state.optimizer.variables]
        return [{"epoch": 0.0}], 0, None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train._Loop, "fit", before_the_first_step)
        result = train.train(hparams, run)
    check_path(result, path)
    whole = exported(
        hparams, run, result, whole=dict(values) == base_of(model, path) or built_whole
    )
    return {**seen, "whole": [w.shape for w in whole["whole"]], "card": whole["card"]}


MODEL_CASES = [
    (model, path, h.name)
    for model, spec in MODELS.items()
    for path in ("images", *(("cache",) if model == CACHED else ()))
    for h in spec.hyperparameters
]


@pytest.mark.parametrize(
    ("model", "path", "name"), MODEL_CASES, ids=["-".join(c) for c in MODEL_CASES]
)
def test_each_models_own_hyperparameter_changes_what_is_built_on_every_path(
    world, model, path, name
):
    key = (world["data"], world["cache"])
    base = tuple(sorted(base_of(model, path).items()))
    whole = name != "trainable_blocks"  # that one sets which part trains, not the whole model
    a = _built(key, model, path, base, True)
    b = _built(key, model, path, variant(model, path, name), whole)
    assert a["trains"] != b["trains"], f"--{name} does not change what trains"
    assert a["slots"] != b["slots"], f"--{name} does not reach the optimizer's variables"
    assert a["card"] != b["card"], f"--{name} not on the model card"
    if whole:
        assert a["whole"] != b["whole"], f"--{name} does not reach the exported model"


def test_every_hyperparameter_is_covered(world):
    """The parametrisations above cover the contract's and every built-in model's flags."""
    covered = {(m, n) for m, _, n in MODEL_CASES}
    for model, spec in MODELS.items():
        assert {(model, h.name) for h in spec.hyperparameters} <= covered
    assert set(BASE) <= set(TRAINER_HYPERPARAMETERS)  # no stale name
    assert Path(world["cache"], f"{CACHED}-frozen13").is_dir()
