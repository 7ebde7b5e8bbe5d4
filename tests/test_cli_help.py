"""`--help` of every command and subcommand reads at 80 columns.

Every option has help text, nothing is cut short with `…` (Rich cuts a word longer
than its column), no option is offered that is always refused, and `--version` is
a plain flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipelines.app.cli import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_listed():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "run", "submit", "schedule", "schedule create", "schedule delete"} <= names
    assert len(names) >= 14


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "hpt-pipeline" for p, _ in COMMANDS]
)
def test_help_at_80_columns_describes_every_option_and_cuts_nothing(path, command):
    text = _help(path)
    assert "…" not in text, text  # a word too long for its column, cut
    assert max(len(line) for line in text.splitlines()) <= 80, text
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    assert options or path == ("schedule",), path  # a group of subcommands may have none
    undescribed = [p.opts[0] for p in options if not (p.help or "").strip()]
    assert undescribed == [], f"{' '.join(path)}: options without help text: {undescribed}"
    for option in options:
        assert option.opts[0] in text, (option.opts[0], text)


def test_version_is_a_plain_flag():
    (line,) = [line for line in _help(()).splitlines() if "--version" in line]
    assert "<" not in line and "Print the version" in line


@pytest.mark.parametrize("path", [("submit",), ("schedule", "create")])
def test_caching_can_only_be_turned_off(path):
    """Caching every task is always refused (preflight): only --no-cache is offered."""
    command = dict(COMMANDS)[path]
    names = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    assert "--no-cache" in names and "--cache" not in names
    assert "--no-cache" in _help(path)
