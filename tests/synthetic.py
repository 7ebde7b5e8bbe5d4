"""A tiny, learnable dataset in the prepared format (for trainer tests; no network)."""

from __future__ import annotations

import datetime

import numpy as np

from trainer import records

CLASS_NAMES = ("dark", "bright")


def make_images(count: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy images whose class is their brightness (dark vs bright) with a square pattern."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % 2
    images = rng.integers(0, 90, size=(count, size, size, 3)).astype(np.int32)
    images[labels == 1] += 120
    images[labels == 1, size // 4 : size // 2, size // 4 : size // 2, :] = 255
    return images.clip(0, 255).astype(np.uint8), labels


def write_dataset(out_dir: str, *, size: int = 32, counts=(96, 32, 32), shards=(4, 2, 2)) -> str:
    """Write train/validation/test splits and metadata.json to `out_dir`."""
    splits = {}
    for i, (split, count, num_shards) in enumerate(
        zip(records.SPLITS, counts, shards, strict=True)
    ):
        images, labels = make_images(count, size, seed=i)
        examples = [
            (img, int(lbl), f"{split}/{n}.png")
            for n, (img, lbl) in enumerate(zip(images, labels, strict=True))
        ]
        splits[split] = {
            **records.split_summary(labels, CLASS_NAMES),
            "shards": records.write_shards(out_dir, split, examples, num_shards),
        }
    records.write_metadata(
        out_dir,
        {
            "class_names": list(CLASS_NAMES),
            "image_shape": [size, size, 3],
            "splits": splits,
            "source": "synthetic",
            "seed": 0,
            "prepared_at": datetime.datetime(2026, 1, 1).isoformat(),
        },
    )
    return out_dir
