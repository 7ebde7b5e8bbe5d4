"""Draw a lineage graph: a Rich tree, Mermaid text, or a standalone HTML page (SVG, offline)."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.lineage import svg
from pipelines.lineage.graph import LineageGraph, Node

if TYPE_CHECKING:
    from rich.tree import Tree

# Node details shown in the tree, Mermaid and HTML (all details stay in the graph).
HEADLINE_KEYS = (
    "state",
    "metrics",
    "parameters",
    "source",
    "metadata_sha256",
    "counts",
    "trial_count",
    "states",
    "best_trial_id",
    "best_metric",
    "best_parameters",
    "why",  # the selection's: why the pick won, its Pareto front and constraints
    "pareto_front",
    "constraints",
    "strategy",
    "replicas",
    "test_accuracy",
    "test_loss",
    "passed_threshold",
    "name",
    "version",
)


def _short(value: Any, width: int = 80) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, Mapping):
        text = " ".join(f"{k}={_short(v, 16)}" for k, v in value.items())
    elif isinstance(value, list | tuple):
        text = ",".join(_short(v, 16) for v in value)
    else:
        text = str(value)
    if re.fullmatch(r"[0-9a-f]{64}", text):  # a sha256: its first 12 digits say enough
        text = text[:12] + "…"
    return text if len(text) <= width else text[: width - 1] + "…"


def headline(node: Node) -> str:
    """The node's key facts on one line (`HEADLINE_KEYS` that it has).

    A trial's metrics come first, the objective leading (`graph.objectives_first`).
    """
    parts = []
    keys: tuple[str, ...] = HEADLINE_KEYS
    if node.kind == "trial":
        keys = ("metrics", *(k for k in HEADLINE_KEYS if k != "metrics"))
    for key in keys:
        value = node.details.get(key)
        if value in (None, "", {}, []):
            continue
        shown = _short(value)
        if key in ("state", "metrics", "parameters"):
            parts.append(shown)
        else:
            parts.append(f"{key}({shown})" if isinstance(value, Mapping) else f"{key}={shown}")
    if node.details.get("best"):
        parts.append("★ best")
    return "  ".join(parts)


@dataclasses.dataclass
class TreeItem:
    """A node placed under one parent; `also` names its other parents."""

    node: Node
    also: list[str]
    children: list[TreeItem]


def _topological(graph: LineageGraph) -> list[str]:
    indegree = {n: 0 for n in graph.nodes}
    for edge in graph.edges:
        indegree[edge.target] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    order: list[str] = []
    while ready:
        current = ready.pop(0)
        order.append(current)
        for child in graph.children(current):
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return order + [n for n in graph.nodes if n not in order]  # cycles: keep them, in order


def spanning_tree(graph: LineageGraph) -> list[TreeItem]:
    """The graph as a tree: each node under its deepest parent, so the tree reads as the story.

    Nodes with several parents appear once; `TreeItem.also` names the others.
    """
    order = _topological(graph)
    depth: dict[str, int] = {}
    placed_under: dict[str, str | None] = {}
    for node_id in order:
        parents = [p for p in graph.parents(node_id) if p in depth]
        deepest = max(parents, key=lambda p: depth[p], default=None)
        depth[node_id] = depth[deepest] + 1 if deepest else 0
        placed_under[node_id] = deepest
    items: dict[str, TreeItem] = {}
    for node_id, parent in placed_under.items():
        also = [graph.nodes[p].name for p in graph.parents(node_id) if p != parent]
        items[node_id] = TreeItem(graph.nodes[node_id], also, [])
    roots: list[TreeItem] = []
    for node_id in order:
        parent = placed_under[node_id]
        (items[parent].children if parent else roots).append(items[node_id])
    return roots


_ICONS = {"execution": "⚙", "artifact": "▣", "trial": "◆"}


def _item_text(item: TreeItem) -> tuple[str, str, str]:
    node = item.node
    name = f"{_ICONS.get(node.kind, '')} {node.name}"
    kind = node.type if node.kind != "execution" else ""
    also = f"(also from {', '.join(item.also)})" if item.also else ""
    return name, " ".join(t for t in (kind, headline(node)) if t), also


def rich_tree(graph: LineageGraph) -> Tree:
    """The spanning tree as a Rich `Tree`.

    Labels wrap between words; a word wider than what is left of the line is cut with `…`
    (at 80 columns a deep node has ~25), never folded onto the next line mid-word.
    """
    from rich.markup import escape
    from rich.text import Text
    from rich.tree import Tree

    root = Tree(f"[bold]{escape(graph.title)}[/]")

    def add(parent: Tree, item: TreeItem) -> None:
        name, facts, also = _item_text(item)
        style = {"execution": "cyan", "trial": "magenta"}.get(item.node.kind, "green")
        label = f"[bold {style}]{escape(name)}[/] {escape(facts)}"
        if also:
            label += f" [dim]{escape(also)}[/]"
        branch = parent.add(Text.from_markup(label, overflow="ellipsis"))
        for child in item.children:
            add(branch, child)

    for item in spanning_tree(graph):
        add(root, item)
    return root


def _mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label (Mermaid's own `#…;` codes for # and ")."""
    return html.escape(text.replace("#", "#35;").replace('"', "#quot;"), quote=False)


def mermaid(graph: LineageGraph) -> str:
    """The graph as a Mermaid flowchart (executions rounded, artifacts boxes, trials hexagons)."""
    ids = {node_id: f"n{i}" for i, node_id in enumerate(graph.nodes)}
    shapes = {"execution": ("([", "])"), "artifact": ("[", "]"), "trial": ("{{", "}}")}
    lines = ["flowchart TD"]
    for node_id, node in graph.nodes.items():
        start, end = shapes.get(node.kind, ("[", "]"))
        facts = headline(node)
        text = _mermaid_text(node.name) + (
            f"<br/><small>{_mermaid_text(facts)}</small>" if facts else ""
        )
        lines.append(f'  {ids[node_id]}{start}"{text}"{end}')
    for edge in graph.edges:
        label = f"|{_mermaid_text(edge.label)}|" if edge.label else ""
        lines.append(f"  {ids[edge.source]} -->{label} {ids[edge.target]}")
    for kind, color in (("execution", "#e3f2fd"), ("artifact", "#e8f5e9"), ("trial", "#f3e5f5")):
        members = [ids[n] for n, node in graph.nodes.items() if node.kind == kind]
        if members:
            lines.append(f"  classDef {kind} fill:{color}")
            lines.append(f"  class {','.join(members)} {kind}")
    best = [ids[n] for n, node in graph.nodes.items() if node.details.get("best")]
    if best:
        lines.append("  classDef best stroke:#c62828,stroke-width:3px")
        lines.append(f"  class {','.join(best)} best")
    return "\n".join(lines) + "\n"


def _html_list(items: Sequence[TreeItem]) -> str:
    rows = []
    for item in items:
        name, facts, also = _item_text(item)
        uri = f" <code>{html.escape(item.node.uri)}</code>" if item.node.uri else ""
        rows.append(
            f"<li><b>{html.escape(name)}</b> {html.escape(facts)}"
            f"{f' <i>{html.escape(also)}</i>' if also else ''}{uri}"
            f"{_html_list(item.children) if item.children else ''}</li>"
        )
    return f"<ul>{''.join(rows)}</ul>"


def html_page(graph: LineageGraph) -> str:
    """A standalone page that needs no network: the graph drawn as SVG, and the same list.

    The Mermaid source (for docs and wikis) stays folded at the end of the page.
    """
    title = html.escape(f"Lineage of {graph.title}")
    drawing = svg.svg(graph, _topological(graph), headline)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}li{{margin:2px 0}}code{{color:#555}}
pre.mermaid{{background:#fafafa;padding:1em}}summary{{color:#555;cursor:pointer}}
#graph svg{{max-width:100%;height:auto}}</style>
</head><body>
<h1>{title}</h1>
<h2>Graph</h2>
<div id="graph">{drawing}</div>
<h2>Lineage (from the inputs down)</h2>
{_html_list(spanning_tree(graph))}
<details><summary>Mermaid source</summary>
<pre class="mermaid">
{html.escape(mermaid(graph))}</pre></details>
</body></html>
"""
