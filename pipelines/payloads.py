"""Strict checks of Vertex payloads: parsed as the API's messages, snake_case keys only."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def payload_items(items: Sequence[Mapping[str, Any] | str]) -> list[dict[str, Any]]:
    """List payload items as dicts: kfp may hand list items over as JSON strings."""
    return [json.loads(i) if isinstance(i, str) else dict(i) for i in items]


class PayloadError(ValueError):
    """A payload Vertex would refuse; the message is one line naming the field."""


def strict_parse(message_name: str, payload: Any, what: str) -> Any:
    """Parse a JSON-able payload as the API message `message_name`, refusing unknown fields.

    Returns:
        The protobuf message (`pipelines.vertex_types`; enums as numbers).

    Raises:
        PayloadError: One line: `what`, then the parser's words.
    """
    from pipelines import vertex_types

    try:
        return vertex_types.parse(message_name, payload)
    except Exception as err:  # google.protobuf.json_format.ParseError, TypeError
        raise PayloadError(f"{what}: {' '.join(str(err).split())}") from None


def refuse_camel_case(payload: Any, what: str) -> None:
    """The proto JSON parser accepts camelCase; the API payloads here must be snake_case."""
    if isinstance(payload, Mapping):
        for key, value in payload.items():
            if any(c.isupper() for c in str(key)):
                raise PayloadError(f"{what}: key {key!r} is camelCase, expected snake_case")
            refuse_camel_case(value, what)
    elif isinstance(payload, list):
        for value in payload:
            refuse_camel_case(value, what)
