"""Matplotlib for report files: the non-interactive backend, imported only when plotting."""

from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
