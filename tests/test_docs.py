"""The docs (README.md, ARCHITECTURE.md, docs/, benchmarks/README.md) name only files that
exist, hold no merge conflict, and the README stays short.

A path is a backticked token or a relative Markdown link whose first segment is a
top-level entry of the repository (`pipelines/study/sampler.py`, `trainer/models/`) or,
as ARCHITECTURE.md abbreviates, a package under `pipelines/` (`study/sampler.py`).
`:name` after a file (`pipelines/settings.py:Settings`) and `#anchor` after a link are
dropped; a placeholder segment (`<name>`, `*`, `{a,b}`, `…`) stops the check at the
folder before it. Ignored output folders (`runs/`, `benchmarks/results/` but for its tracked
`*.md` history) are skipped. A link starting `../` is resolved from the doc's own folder.
Text only: no import, no subprocess.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "ARCHITECTURE.md", "benchmarks/README.md") + tuple(
    sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
)
README_MAX_CHARS = 10_000
# A map read in ten minutes, and a benchmark summary read in one: details go to docs/ and
# benchmarks/results/.
MAX_CHARS = {
    "README.md": README_MAX_CHARS,
    "ARCHITECTURE.md": 20_000,
    "benchmarks/README.md": 8_000,
}
# Paths git ignores: outputs a fresh checkout does not have.
IGNORED = ("runs/", "out/", "build/", "dist/", ".venv/", "benchmarks/results/")
# Top-level folders whose files a doc may name; `pipelines/` packages also without the prefix.
ROOTS = ("pipelines", "trainer", "components", "dataprep", "images", "tests", "benchmarks",
         "docs", ".ci")  # fmt: skip
TOP_FILES = ("Makefile", "pyproject.toml", "cloudbuild.yaml", "README.md", "ARCHITECTURE.md")
PLACEHOLDER = re.compile(r"[<>*{}…]")
BACKTICKED = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CONFLICT = re.compile(r"^(<<<<<<<|=======$|>>>>>>>)", re.MULTILINE)


def pipelines_packages() -> set[str]:
    return {p.name for p in (ROOT / "pipelines").iterdir() if p.is_dir() and p.name[0] != "_"}


def named_paths(text: str) -> list[str]:
    """The repository paths a document names, as written (see the module docstring)."""
    candidates = BACKTICKED.findall(text) + [
        link for link in LINK.findall(text) if "://" not in link and not link.startswith("#")
    ]
    short = pipelines_packages()
    found = []
    for token in candidates:
        token = token.split("#", 1)[0]
        if token in TOP_FILES:
            found.append(token)
            continue
        if " " in token or "/" not in token or "://" in token or token.startswith(("/", "~")):
            continue
        first = token.split("/", 1)[0]
        if first in ROOTS or first in short:
            found.append(token)
    return found


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """The paths `text` names that are not in the repository at `root`."""
    short = {p.name for p in (root / "pipelines").iterdir() if p.is_dir()}
    missing = []
    for written in named_paths(text):
        path = written.split(":", 1)[0].rstrip("/.,")
        tracked = path.startswith("benchmarks/results/") and path.endswith(".md")
        if not tracked and (path.startswith(IGNORED) or f"{path}/".startswith(IGNORED)):
            continue
        segments = path.split("/")
        for i, segment in enumerate(segments):
            if PLACEHOLDER.search(segment):
                segments = segments[:i]
                break
        path = "/".join(segments)
        if not path:
            continue
        candidates = [root / path]
        if segments[0] in short and segments[0] not in ROOTS:
            candidates.append(root / "pipelines" / path)
        if not any(c.exists() for c in candidates):
            missing.append(written)
    return missing


def missing_relative_links(text: str, folder: Path) -> list[str]:
    """The `../` links of a doc in `folder` that lead nowhere."""
    links = [link.split("#", 1)[0] for link in LINK.findall(text) if link.startswith("../")]
    return [link for link in links if not (folder / link).exists()]


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc):
    text = (ROOT / doc).read_text()
    assert missing_paths(text) + missing_relative_links(text, (ROOT / doc).parent) == []


@pytest.mark.parametrize("doc", DOCS)
def test_no_merge_conflict_markers(doc):
    assert CONFLICT.findall((ROOT / doc).read_text()) == []


@pytest.mark.parametrize("doc", sorted(MAX_CHARS))
def test_the_maps_stay_short(doc):
    size = len((ROOT / doc).read_text())
    assert size <= MAX_CHARS[doc], f"{doc} is {size} characters (cap {MAX_CHARS[doc]})"


def test_the_checker_catches_a_missing_path_and_a_conflict():
    text = "See `pipelines/study/sampler.py`, `study/nope.py` and [x](trainer/gone.py#a).\n"
    assert missing_paths(text) == ["study/nope.py", "trainer/gone.py"]
    assert missing_paths("`trainer/models/<name>.py`, `pipelines/settings.py:Settings`") == []
    assert missing_paths("`pipelnes/x.py` is no root; `runs/latest/study` is output") == []
    assert missing_paths("`benchmarks/results/gone.md`, `benchmarks/results/x.json`") == [
        "benchmarks/results/gone.md"
    ]
    assert missing_relative_links("[a](../images/README.md#x), [b](../gone.md)", ROOT / "docs") == [
        "../gone.md"
    ]
    assert CONFLICT.findall("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> main\n")


def test_architecture_md_links_every_docs_file():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    unlinked = [
        f"docs/{p.name}"
        for p in sorted((ROOT / "docs").glob("*.md"))
        if f"](docs/{p.name})" not in text
    ]
    assert unlinked == [], "ARCHITECTURE.md's table of behaviour notes should link these"


def test_the_readme_sends_a_reader_of_the_code_to_architecture_md_first():
    """The README's first screen (before its first section) links the map of the code."""
    intro = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    assert "[ARCHITECTURE.md](ARCHITECTURE.md)" in intro
