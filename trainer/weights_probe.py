"""`python -m trainer.weights_probe MODEL WEIGHTS SIZE`: do the weights load into the backbone?

Run by the local run's preflight before any data is prepared (the CLI never imports
TensorFlow), so a missing or corrupt weights file, or `imagenet` neither cached nor
downloadable, is said once in one line instead of by every trial. Exit 0 when the model
builds with the weights; else `EXIT_SETUP_ERROR` with the trainer's one-line reason.
"""

from __future__ import annotations

import sys

from trainer.contract import EXIT_SETUP_ERROR, TRAINER, ContractError


def main(argv: list[str]) -> int:
    """Build MODEL with WEIGHTS at IMAGE_SIZE (2 classes); the exit code says whether it could."""
    model, weights, size = argv
    from trainer.models import MODELS, build_model

    spec = MODELS[model]
    shape = (int(size), int(size), max(spec.channels))
    try:
        build_model(spec, {}, weights, shape, 2)
    except ContractError as err:  # WeightsError: missing, does not fit, cannot download
        print(f"{TRAINER}: error: {err}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
