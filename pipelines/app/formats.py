"""How listing commands print: a Rich table that keeps its columns when piped, CSV or JSON.

On a terminal Rich fits a table to its width. Piped (`| less`, `> file`) it would
fall back to 80 columns and cut the table; there the console is as wide as the
table. `--format csv|json` prints data for scripts instead.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.app.errors import fail

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("table", "csv", "json")
FORMAT_HELP = "table (for people) | csv | json (for scripts)."


def check_format(value: str) -> str:
    """`value` when it is one of `FORMATS`; else the CLI's one-line error."""
    if value not in FORMATS:
        fail(f"--format={value}: expected one of {', '.join(FORMATS)}")
    return value


def console_for(renderable: Any, file: Any = None) -> Console:
    """A console on `file` (stdout) that prints `renderable` whole.

    A terminal keeps its own width; anything else gets the renderable's full width.
    """
    from rich.console import Console

    console = Console(file=file or sys.stdout)
    if console.is_terminal:
        return console
    wide = Console(file=file or sys.stdout, width=100_000)
    width = wide.measure(renderable).maximum
    return Console(file=file or sys.stdout, width=max(width, 80))


def print_table(table: Any, file: Any = None) -> Console:
    """Print a Rich table whole (see `console_for`); return the console used."""
    console = console_for(table, file)
    console.print(table)
    return console


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as CSV text (empty cells for None)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return buffer.getvalue()


def json_text(data: Any) -> str:
    """Data as indented JSON (one trailing newline)."""
    return json.dumps(data, indent=2, default=str) + "\n"
