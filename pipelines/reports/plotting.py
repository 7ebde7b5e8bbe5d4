"""Matplotlib for report files: the non-interactive backend, imported only when plotting."""

from typing import Any

# Fonts that map every character to a placeholder box: they cover nothing.
PLACEHOLDER_FONTS = ("Last Resort",)


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def font_for(texts: list[str]) -> str | None:
    """The family of an installed font that draws every character of `texts` (None: none does).

    Matplotlib's default (DejaVu Sans) has no CJK glyphs: such a class name would be a row
    of blank boxes, with a missing-glyph warning on the screen. Callers fall back to a
    stated stand-in (`label_stand_ins`) when no font covers the names.
    """
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    needed = {ord(c) for text in texts for c in text if not c.isspace()}
    family = matplotlib.rcParams["font.family"]
    default = font_manager.findfont(font_manager.FontProperties(family=family))
    paths = [default, *sorted({f.fname for f in font_manager.fontManager.ttflist} - {default})]
    for path in paths:
        try:
            font = FT2Font(path)
        except (OSError, RuntimeError):
            continue
        if font.family_name.startswith(PLACEHOLDER_FONTS):
            continue
        if needed <= set(font.get_charmap()):
            return str(font.family_name)
    return None


def label_stand_ins(names: list[str]) -> list[str]:
    """`#0`, `#1`…: what a figure shows for names no installed font draws (the page names them)."""
    return [f"#{i}" for i in range(len(names))]
