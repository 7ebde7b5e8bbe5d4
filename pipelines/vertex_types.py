"""The Vertex AI API messages that payload checks parse into, without importing the SDK.

Importing `google.cloud.aiplatform_v1` is slow (grpc, aiohttp, google-auth), and local steps
paid it only to check payloads (issue 18; the figures: `benchmarks/README.md`). A check
needs the messages' descriptors, not the SDK: `vertex_types.binpb` holds them, a
`FileDescriptorSet` of the files that `ROOT_MESSAGES` need (with their dependencies) exactly
as the pinned SDK defines them, loaded into a private descriptor pool. Payloads are parsed
by protobuf's JSON parser, the one the SDK's `Message.from_json` calls, so the same fields
are refused with the same words.

`tests/test_vertex_types.py` rebuilds the file from the installed SDK and requires it
byte for byte; after upgrading google-cloud-aiplatform, rewrite it with
`python -m pipelines.vertex_types`.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

PACKAGE = "google.cloud.aiplatform.v1"
ROOT_MESSAGES = ("WorkerPoolSpec", "StudySpec")  # aiplatform_v1.types names
DESCRIPTORS = Path(__file__).with_name("vertex_types.binpb")


def descriptor_set_from_sdk() -> bytes:
    """The descriptors of `ROOT_MESSAGES` and their dependencies, read from the installed SDK.

    Imports `google.cloud.aiplatform_v1` (what the stored file spares every other caller).
    """
    from google.cloud.aiplatform_v1 import types

    files: list[Any] = []

    def add(file: Any) -> None:
        if any(known.name == file.name for known in files):
            return
        # proto-plus lists a file's imports in no fixed order (it builds them from a set):
        # sorted here, and in the copies below, so the same SDK gives the same bytes.
        for dependency in sorted(file.dependencies, key=lambda d: d.name):
            add(dependency)
        files.append(file)  # after its dependencies, as a pool needs them

    for name in ROOT_MESSAGES:
        add(getattr(types, name).pb().DESCRIPTOR.file)
    out = descriptor_pb2.FileDescriptorSet()
    for file in files:
        copy = out.file.add()
        file.CopyToProto(copy)
        if copy.public_dependency or copy.weak_dependency:  # indices into `dependency`
            raise ValueError(f"{copy.name}: public/weak imports, cannot reorder its imports")
        copy.dependency[:] = sorted(copy.dependency)
    return out.SerializeToString(deterministic=True)


@functools.cache
def _pool() -> descriptor_pool.DescriptorPool:
    """A private pool (the SDK, if a process imports it too, fills the default one)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return pool


def message_class(name: str) -> type[Message]:
    """The protobuf class of `google.cloud.aiplatform.v1.<name>`, e.g. `StudySpec.MetricSpec`."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{PACKAGE}.{name}"))


def parse(name: str, payload: Any) -> Message:
    """Parse a payload (JSON-able, or JSON text) as the SDK's `from_json` does: no unknown fields.

    Raises:
        google.protobuf.json_format.ParseError: What the SDK would raise, worded alike.
    """
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return json_format.Parse(text, message_class(name)(), ignore_unknown_fields=False)


def enum_name(message: Message, field: str) -> str:
    """The name of an enum field's value (`UNIT_LOG_SCALE`), as the SDK's `.name` gives it."""
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    return enum.values_by_number[getattr(message, field)].name


def main() -> int:
    """Rewrite `vertex_types.binpb` from the installed SDK; print whether it changed."""
    new = descriptor_set_from_sdk()
    old = DESCRIPTORS.read_bytes() if DESCRIPTORS.exists() else b""
    if new != old:
        DESCRIPTORS.write_bytes(new)
    print(f"{DESCRIPTORS}: {'rewritten' if new != old else 'up to date'} ({len(new)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
