"""The lineage graph as an SVG drawing, laid out here: a page that draws with no network.

Layers top to bottom (a node one layer below its deepest parent), nodes left to right
in each layer; executions are rounded boxes, artifacts plain boxes, trials hexagon-ended
boxes; the best trial has a red border. Each box holds the node's name and its headline,
wrapped between words and cut at a word with `…` when too long (the box's tooltip has it
whole). An edge between
adjacent layers is a curve; one that skips layers runs in a lane of its own left of the
boxes, so it never crosses a box.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable

from pipelines.lineage.graph import LineageGraph, Node

BOX_W, BOX_H = 230, 58
GAP_X, GAP_Y = 24, 46
MARGIN = 12
CHARS = 34  # characters a box line holds at the font size below
LANE = 10  # width of the lane an edge that skips layers runs in
BREAKS = " -_/."  # where a clipped label may end
FILLS = {"execution": "#e3f2fd", "artifact": "#e8f5e9", "trial": "#f3e5f5"}


def layers(graph: LineageGraph, order: list[str]) -> list[list[str]]:
    """Node ids per layer, given the nodes in topological order."""
    depth: dict[str, int] = {}
    for node_id in order:
        parents = [depth[p] for p in graph.parents(node_id) if p in depth]
        depth[node_id] = max(parents, default=-1) + 1
    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node_id in order:
        rows[depth[node_id]].append(node_id)
    return rows


def _clip(text: str, more: bool = False) -> str:
    """`text` fitted to a box line, cut after a word (not inside one) with `…` when cut.

    `more`: text follows that the box cannot show, so the line ends with `…` anyway.
    """
    if len(text) <= CHARS and not more:
        return text
    room = text[: CHARS - 1]
    cut = max(room.rfind(c) for c in BREAKS)
    kept = room[: cut + 1].rstrip() if cut > CHARS // 2 and len(text) > CHARS - 1 else room
    return kept.rstrip().rstrip("…") + "…"


def _box(node: Node, x: int, y: int, headline: str) -> str:
    rx = {"execution": 18, "trial": 4}.get(node.kind, 0)
    stroke = ' stroke="#c62828" stroke-width="3"' if node.details.get("best") else ""
    stroke = stroke or ' stroke="#607d8b" stroke-width="1"'
    title = html.escape(f"{node.name}\n{headline}".strip())
    wrapped = textwrap.wrap(headline, CHARS, break_long_words=False, break_on_hyphens=False)
    lines = [_clip(node.name)] + [
        _clip(line, more=i == 1 and len(wrapped) > 2) for i, line in enumerate(wrapped[:2])
    ]
    bold = ' font-weight="bold"'
    texts = "".join(
        f'<text x="{x + BOX_W // 2}" y="{y + 17 + 15 * i}" text-anchor="middle"'
        f"{bold if i == 0 else ''}>{html.escape(line)}</text>"
        for i, line in enumerate(lines)
    )
    fill = FILLS.get(node.kind, "#fff")
    return (
        f'<g><title>{title}</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" '
        f'rx="{rx}" fill="{fill}"{stroke}/>{texts}</g>'
    )


def svg(graph: LineageGraph, order: list[str], headline: Callable[[Node], str]) -> str:
    """The graph drawn as an inline `<svg>` element (nodes in `order`, topological)."""
    rows = layers(graph, order)
    row_of = {n: r for r, row in enumerate(rows) for n in row}
    long_edges = [e for e in graph.edges if row_of[e.target] - row_of[e.source] > 1]
    lanes = len(long_edges) * LANE  # left of the boxes, one lane per edge that skips layers
    widest = max((len(r) for r in rows), default=1)
    boxes_width = widest * BOX_W + (widest - 1) * GAP_X
    width = 2 * MARGIN + lanes + boxes_width
    height = 2 * MARGIN + len(rows) * BOX_H + max(0, len(rows) - 1) * GAP_Y
    where: dict[str, tuple[int, int]] = {}
    for r, row in enumerate(rows):
        row_width = len(row) * BOX_W + (len(row) - 1) * GAP_X
        left = MARGIN + lanes + (boxes_width - row_width) // 2
        for i, node_id in enumerate(row):
            where[node_id] = (left + i * (BOX_W + GAP_X), MARGIN + r * (BOX_H + GAP_Y))
    edges = []
    for edge in graph.edges:
        (sx, sy), (tx, ty) = where[edge.source], where[edge.target]
        x1, y1, x2, y2 = sx + BOX_W // 2, sy + BOX_H, tx + BOX_W // 2, ty
        mid = (y1 + y2) // 2
        route = f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2 - 2}"
        if edge in long_edges:  # down into the gap, left to its lane, down, right, in
            lane = MARGIN + long_edges.index(edge) * LANE + LANE // 2
            below, above = y1 + GAP_Y // 3, y2 - GAP_Y // 3
            route = f"M{x1},{y1} V{below} H{lane} V{above} H{x2} V{y2 - 2}"
        edges.append(
            f'<path d="{route}" fill="none" '
            f'stroke="#90a4ae" marker-end="url(#arrow)"><title>{html.escape(edge.label)}'
            "</title></path>"
        )
    boxes = [_box(graph.nodes[n], *where[n], headline(graph.nodes[n])) for n in where]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" '
        'role="img"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="#90a4ae"/></marker></defs>{"".join(edges)}{"".join(boxes)}</svg>'
    )
