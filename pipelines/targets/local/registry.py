"""The local model registry: versioned folders standing in for Vertex Model Registry.

Layout::

    <registry>/<model name>/v1/model/            the SavedModel (copied)
    <registry>/<model name>/v1/model_card.json   metrics, parameters, dataset, lineage

A version appears all at once (written to a staging folder, then renamed). A model whose
bytes are those of a version already there (a rerun that changed nothing: it reuses its
finished final job) is not registered again: that version is reported (`reused`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from pipelines.study.selection import chance_level

CARD = "model_card.json"
_VERSION = re.compile(r"^v(\d+)$")


def versions(registry: str | Path, name: str) -> list[int]:
    """Version numbers of a model, ascending."""
    folder = Path(registry) / name
    if not folder.is_dir():
        return []
    return sorted(int(m[1]) for p in folder.iterdir() if (m := _VERSION.match(p.name)))


def model_digest(model_dir: str | Path) -> str:
    """sha256 of a model folder: every file's relative path and bytes, in path order."""
    root = Path(model_dir)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def registered_as(registry: str | Path, name: str, digest: str) -> dict[str, Any] | None:
    """The card of the version of `name` whose model has `digest`, or None."""
    for card in list_models(registry):
        if card["name"] == name and card.get("model_sha256") == digest:
            return card
    return None


def register(
    model_dir: str | Path, registry: str | Path, name: str, card: dict[str, Any]
) -> dict[str, Any]:
    """Copy a SavedModel into the registry as the next version of `name`; return its card.

    The same model (bytes) already registered under `name`: that version's card, with
    `reused` True, and nothing is written.
    """
    digest = model_digest(model_dir)
    if found := registered_as(registry, name, digest):
        return {**found, "reused": True}
    folder = Path(registry) / name
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".staging-{uuid.uuid4().hex}"
    try:
        shutil.copytree(model_dir, staging / "model")
        while True:
            version = (versions(registry, name) or [0])[-1] + 1
            full_card = {
                **card,
                "name": name,
                "version": version,
                "model_sha256": digest,
                "registered_at": datetime.datetime.now(datetime.UTC).isoformat(),
                "path": str((folder / f"v{version}").resolve()),
            }
            (staging / CARD).write_text(json.dumps(full_card, indent=2, sort_keys=True))
            try:
                os.rename(staging, folder / f"v{version}")
                return {**full_card, "reused": False}
            except OSError:  # another run took this version number: take the next
                continue
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def list_models(registry: str | Path) -> list[dict[str, Any]]:
    """Every registered version's card, by model name then version."""
    root = Path(registry)
    if not root.is_dir():
        return []
    cards = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for version in versions(root, folder.name):
            cards.append(json.loads((folder / f"v{version}" / CARD).read_text()))
    return cards


def chance_line(test_accuracy: Any, classes: int) -> str | None:
    """A warning when `test_accuracy` is at or below chance (1 / `classes`), else None."""
    chance = chance_level(test_accuracy, classes)
    if chance is None:
        return None
    return (
        f"warning: test_accuracy {test_accuracy:.4f} is at or below chance ({chance:.4f} for "
        f"{classes} classes): the model learned nothing; --eval-threshold keeps such a model "
        "out of the registry"
    )
