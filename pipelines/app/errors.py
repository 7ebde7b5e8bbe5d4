"""The CLI's one error convention: one line on stderr naming the bad value, exit code 2."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NoReturn

import typer

PROG = "hpt-pipeline"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `hpt-pipeline: error: <message>` on stderr and exit with `code`."""
    typer.echo(f"{PROG}: error: {message}", err=True)
    raise typer.Exit(code)


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (or its type name)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


@contextlib.contextmanager
def cloud_errors(hint: str = "run `gcloud auth application-default login`") -> Iterator[None]:
    """Turn Google auth and API errors into one line (exit 2)."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError

    try:
        yield
    except GoogleAuthError as err:
        fail(f"Google Cloud credentials: {first_line(err)} ({hint})")
    except GoogleAPIError as err:
        fail(first_line(err))
