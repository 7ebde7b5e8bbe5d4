"""A cached trial's export: the part that trained and how to rebuild the whole model.

Nothing in the pipeline reads an HPT trial's model folder (`AIP_MODEL_DIR`,
`<base>/<trial_id>/model/`): the final job trains the best trial's values again and
exports, evaluates and registers the whole model. So a trial that trained on a feature
cache (`CLOUD_ML_TRIAL_ID` set, a matching entry used) writes there only what it trained,
`trained_part.npz` (the weights of the layers above the frozen depth: for
`trainable_blocks=0` the head), beside `model.json` (its card, with the cost measured on
the whole serving model as every trial's, and the cache keys), instead of the whole
SavedModel. `python -m trainer.trial_export --trial_dir DIR --model_dir OUT` builds the
whole serving model from it: the pretrained part from the trial's `--weights` (checked
against the fingerprint it trained with), the trained part on top, the same export as
`trainer.export` writes. A trial from images and every job export the whole model.
"""

from __future__ import annotations

import argparse
import io
import os
import posixpath
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from trainer.config import ConfigError, HParams
from trainer.contract import EXIT_SETUP_ERROR, TRAINER_HYPERPARAMETERS

TRAINED_FILE = "trained_part.npz"
KIND = "trained_part"  # model.json's `export.kind` of such a folder
PROG = "trainer.trial_export"


def applies(frozen_depth: int, environ: Mapping[str, str]) -> bool:
    """Whether a run saves its trained part only: an HPT trial that trained on a cache."""
    return frozen_depth > 0 and bool(environ.get("CLOUD_ML_TRIAL_ID"))


def rebuild_command(trial_dir: str) -> str:
    """The command that writes the whole model of the trial at `trial_dir`."""
    return f"python -m {PROG} --trial_dir={trial_dir} --model_dir=OUT"


def card_section(frozen_depth: int, cache_keys: Mapping[str, Any], trial_dir: str) -> dict:
    """model.json's `export` entry of a trained-part folder: what it holds, how to rebuild."""
    return {
        "kind": KIND,
        "trained_file": TRAINED_FILE,
        "frozen_depth": int(frozen_depth),
        "cache_keys": dict(cache_keys),
        "whole_model": rebuild_command(trial_dir),
    }


def save(trained: Sequence[Any], *, model_dir: str, card: Mapping[str, Any]) -> str:
    """Write `trained` (arrays, in the trained part's order) and `card` at `model_dir`.

    All or nothing (`trainer.staging`), model.json last.
    """
    import numpy as np
    import tensorflow as tf

    from trainer import export, staging

    with staging.staged_directory(model_dir, markers=(export.MODEL_CARD,)) as stage:
        buffer = io.BytesIO()
        np.savez(buffer, *[np.asarray(w) for w in trained])
        with tf.io.gfile.GFile(posixpath.join(stage, TRAINED_FILE), "wb") as f:
            f.write(buffer.getvalue())
        export.write_card(stage, dict(card))
    return model_dir


def hparams_of(card: Mapping[str, Any], weights: str | None) -> HParams:
    """The trial's hyperparameters from its card (`weights` replaces the recorded weights)."""
    values = dict(card["hyperparameters"])
    own = {name: values.pop(name) for name in TRAINER_HYPERPARAMETERS if name in values}
    return HParams(
        **own,
        model=card["model"]["name"],
        weights=weights or card["model"]["weights"],
        model_params=values,
    )


def rebuild(trial_dir: str, model_dir: str, weights: str | None = None) -> str:
    """Write the whole serving model of the cached trial at `trial_dir` to `model_dir`.

    Raises:
        ConfigError: One line: not a trained-part folder, or weights other than the trial's.
    """
    import numpy as np
    import tensorflow as tf

    from trainer import export, feature_store, stages
    from trainer.models import model_spec

    try:
        card = export.read_model_card(trial_dir)
    except (OSError, tf.errors.NotFoundError):
        card = {}
    section = card.get("export") or {}
    if section.get("kind") != KIND:
        raise ConfigError(
            f"--trial_dir={trial_dir}: expected a cached trial's folder ({TRAINED_FILE} and "
            f"model.json with export.kind={KIND})"
        )
    hparams = hparams_of(card, weights)
    seed = int(card["training"]["seed"])
    recorded = section["cache_keys"].get("weights_fingerprint")
    try:
        found = feature_store.weights_fingerprint(hparams.weights, seed)
    except (OSError, tf.errors.OpError):
        raise ConfigError(f"--weights={hparams.weights}: no such file") from None
    if recorded and found != recorded:
        raise ConfigError(
            f"--weights={hparams.weights}: fingerprint {found}, the trial trained on "
            f"{recorded}; pass --weights with the backbone weights it trained on"
        )
    with tf.io.gfile.GFile(posixpath.join(trial_dir, TRAINED_FILE), "rb") as f:
        arrays = np.load(io.BytesIO(f.read()))
        trained = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    dataset = card["dataset"]
    shape, names = dataset["image_shape"], dataset["class_names"]
    model = stages.assemble(
        model_spec(hparams.model),
        hparams,
        shape,
        len(names),
        seed,
        int(section["frozen_depth"]),
        trained,
    )
    whole = {**card, "export": {"kind": "whole", "rebuilt_from": trial_dir}}
    module = export.ServingModule(model, shape, names)
    return export.save_module(module, model_dir=model_dir, card=whole)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, allow_abbrev=False)
    parser.add_argument("--trial_dir", required=True, help="a cached trial's model folder")
    parser.add_argument("--model_dir", required=True, help="where to write the whole model")
    parser.add_argument(
        "--weights", default=None, help="the backbone's weights file (default: the trial's)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        out = rebuild(args.trial_dir, args.model_dir, args.weights)
    except ConfigError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    print(f"{PROG}: wrote the whole model to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
