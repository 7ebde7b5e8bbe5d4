"""The local model registry: versioned folders standing in for Vertex Model Registry.

Layout::

    <registry>/<model name>/v1/model/            the SavedModel (copied)
    <registry>/<model name>/v1/model_card.json   metrics, parameters, dataset, lineage

A version appears all at once (written to a staging folder, then renamed).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

CARD = "model_card.json"
_VERSION = re.compile(r"^v(\d+)$")


def versions(registry: str | Path, name: str) -> list[int]:
    """Version numbers of a model, ascending."""
    folder = Path(registry) / name
    if not folder.is_dir():
        return []
    return sorted(int(m[1]) for p in folder.iterdir() if (m := _VERSION.match(p.name)))


def register(
    model_dir: str | Path, registry: str | Path, name: str, card: dict[str, Any]
) -> dict[str, Any]:
    """Copy a SavedModel into the registry as the next version of `name`; return its card."""
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
                "registered_at": datetime.datetime.now(datetime.UTC).isoformat(),
                "path": str((folder / f"v{version}").resolve()),
            }
            (staging / CARD).write_text(json.dumps(full_card, indent=2, sort_keys=True))
            try:
                os.rename(staging, folder / f"v{version}")
                return full_card
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
