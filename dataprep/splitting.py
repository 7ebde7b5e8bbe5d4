"""Deterministic split membership: stratified carving of missing splits out of train.

A source provides ``train`` and maybe ``validation`` / ``test``. Each missing
split is carved out of train, class by class, so every split keeps the class
balance; the same items, fractions and seed always give the same membership
and the same order within each split.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

# A source item: (key, label), such as dataprep.sources.Item.
LabelledItem = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """The items of one output split, in write order, and the source split they come from."""

    origin: str
    items: list[LabelledItem]


def allocate(class_sizes: Sequence[int], fraction: float) -> np.ndarray:
    """Per-class counts summing to round(total × fraction), each close to size × fraction.

    Largest-remainder rounding: floors first, then one more for the classes with
    the largest remainders (ties to the lower class index).
    """
    sizes = np.asarray(class_sizes, dtype=np.int64)
    exact = sizes * fraction
    counts = np.floor(exact).astype(np.int64)
    missing = int(round(float(sizes.sum()) * fraction)) - int(counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: max(missing, 0)]] += 1
    return np.minimum(counts, sizes)


def plan_splits(
    provided: Mapping[str, Sequence[LabelledItem]],
    carve: Mapping[str, float],
    seed: int,
) -> dict[str, SplitPlan]:
    """Decide every output split's items and order.

    Args:
        provided: (key, label) items of each split the source has (must include
            ``train``), each in a stable order (sorted paths, stored order).
        carve: Splits to carve out of train → fraction of train's items they take,
            carved in this order.
        seed: Seed of the shuffles.

    Returns:
        Split name → SplitPlan, for the provided splits and the carved ones; the
        items of each split are shuffled (so shards and batches mix classes).
    """
    rng = np.random.default_rng(seed)
    train_labels = np.asarray([label for _, label in provided["train"]], dtype=np.int64)
    remaining = [
        rng.permutation(np.flatnonzero(train_labels == label))
        for label in range(int(train_labels.max(initial=-1)) + 1)
    ]
    members = {name: np.arange(len(items)) for name, items in provided.items()}
    origins = {name: name for name in provided}
    remaining_share = 1.0
    for name, fraction in carve.items():
        counts = allocate([len(indices) for indices in remaining], fraction / remaining_share)
        taken = [indices[:n] for indices, n in zip(remaining, counts, strict=True)]
        remaining = [indices[n:] for indices, n in zip(remaining, counts, strict=True)]
        members[name] = np.sort(np.concatenate([[], *taken]))
        origins[name] = "train"
        remaining_share -= fraction
    if carve:
        members["train"] = np.sort(np.concatenate([[], *remaining]))
    return {
        name: SplitPlan(
            origins[name],
            [provided[origins[name]][int(i)] for i in rng.permutation(members[name])],
        )
        for name in members
    }
