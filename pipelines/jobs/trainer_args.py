"""The trainer's command line inside a job payload, and artifact locations the trainer can read."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from trainer.contract import FIXED_TRAINER_SETTINGS, flag
from trainer.feature_keys import ENTRYPOINT, FEATURES_FLAG

TRAINER_COMMAND = ["python", "-m", "trainer.task"]
FEATURES_COMMAND = ["python", "-m", ENTRYPOINT]


LOCATION_KEY = "location"  # artifact metadata: where its content really is, when not at its URI


def artifact_location(artifact: Any) -> str:
    """Where a job reads an artifact: a recorded `location`, its gs:// URI, or its local path.

    On Vertex the gs:// URI (trainers read it through TF's GCS file system); here the
    local path; on Kubeflow with a shared volume, the `location` its writer recorded.
    """
    recorded = (getattr(artifact, "metadata", None) or {}).get(LOCATION_KEY)
    if recorded:
        return str(recorded)
    uri = str(artifact.uri)
    return uri if uri.startswith("gs://") else str(artifact.path)


def shared_location(artifact: Any, shared_root: str) -> str:
    """Where a job writes an artifact's content: under `shared_root` when set, else as above.

    With a shared volume (Kubeflow: a PVC mounted at `shared_root` in every pod) the
    content goes to `<shared_root>/<the URI's path without scheme and bucket>`, unique
    per run and task; the writer records it as the artifact's `location`.
    """
    uri = str(artifact.uri)
    if not shared_root or uri.startswith("gs://"):
        return artifact_location(artifact)
    tail = uri.split("://", 1)[-1].split("/", 1)[-1] if "://" in uri else uri.lstrip("/")
    location = f"{shared_root.rstrip('/')}/{tail}"
    artifact.metadata[LOCATION_KEY] = location
    return location


def fixed_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The contract's `FIXED_TRAINER_SETTINGS` picked out of `values` (a component's inputs).

    Raises:
        ValueError: A fixed setting missing from `values`.
    """
    missing = [name for name in FIXED_TRAINER_SETTINGS if name not in values]
    if missing:
        raise ValueError(f"fixed trainer settings missing: {', '.join(missing)}")
    return {name: values[name] for name in FIXED_TRAINER_SETTINGS}


def trainer_flags(data: str, settings: Mapping[str, Any], tuned: Collection[str] = ()) -> list[str]:
    """Fixed trainer flags shared by every trial and the final job, for data at `data`.

    One flag per `FIXED_TRAINER_SETTINGS` entry, in its order; integers are cast (kfp.local
    and compiled specs may hand `5.0` for `5`). A fixed setting every trial is given as a
    study parameter (named in `tuned`: `epochs`, `batch_size`, `model`) is left out: the
    `--<name>=<value>` appended after is then its only flag.

    Raises:
        ValueError: `settings` lacks a fixed setting or has one the contract does not list.
    """
    unknown = sorted(set(settings) - set(FIXED_TRAINER_SETTINGS))
    if unknown:
        raise ValueError(f"not fixed trainer settings: {', '.join(unknown)}")
    fixed = fixed_settings(settings)
    return [flag("data", data)] + [
        flag(name, int(fixed[name]) if kind is int else fixed[name])
        for name, kind in FIXED_TRAINER_SETTINGS.items()
        if name not in tuned
    ]


def trainer_args(
    dataset: Any, settings: Mapping[str, Any], tuned: Collection[str] = ()
) -> list[str]:
    """`trainer_flags` for a dataset artifact (read where `artifact_location` says)."""
    return trainer_flags(artifact_location(dataset), settings, tuned)


def parameter_args(parameters: Mapping[str, Any]) -> list[str]:
    """`--<parameter_id>=<value>` flags, as Vertex HPT appends them to a trial's args.

    kfp.local turns numbers inside dicts into floats: integral values are written as ints.
    """
    return [flag(name, value) for name, value in sorted(parameters.items())]


def features_args(
    data: str,
    output: str,
    *,
    models: Sequence[tuple[str, str]],
    weights: str,
    precision: str,
    batch_size: int,
    seed: int,
) -> list[str]:
    """The features entrypoint's flags: each `(model, trainable_blocks)` of `models` cached.

    `--model` and `--trainable_blocks` (`0,2`) pair in order.

    Weights, precision, batch size and seed (a random backbone's: `--weights none`) are the
    trials' own, so the cache's keys are the ones a trial looks for.
    """
    return [
        flag("data", data),
        flag("output", output),
        *(flag("model", model) for model, _ in models),
        flag("weights", weights),
        flag("precision", precision),
        *(flag("trainable_blocks", blocks) for _, blocks in models),
        flag("batch_size", int(batch_size)),
        flag("seed", int(seed)),
    ]


FEATURES_DIR_KEY = "features_dir"  # the features artifact's metadata: the cache, "" for none


def features_flag(features: Any) -> list[str]:
    """`--features=<folder>` for a trial or the final job; nothing when no cache was computed.

    `features` is the features step's artifact (or None): its `features_dir` metadata.
    """
    folder = str((getattr(features, "metadata", None) or {}).get(FEATURES_DIR_KEY) or "")
    return [flag(FEATURES_FLAG, folder)] if folder else []
