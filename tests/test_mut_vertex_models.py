"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/models.py.

What the Model Registry lookup asks Vertex (the `ListModelsRequest`, caught at the client
method that would reach the network) and what the register step splices into GCPC's JSON.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from pipelines.targets.vertex import models as vertex_models

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.cloud.aiplatform"),
    importlib.import_module("google.cloud.aiplatform_v1.services.model_service"),
]


@pytest.fixture
def registry(monkeypatch):
    """Vertex's ListModels at its boundary: the requests asked, the models it answers."""
    from google.cloud.aiplatform_v1.services.model_service import ModelServiceClient

    asked: list[Any] = []
    answer: list[Any] = []

    def list_models(self, request=None, **kwargs):
        asked.append(request)
        return list(answer)

    monkeypatch.setattr(ModelServiceClient, "list_models", list_models)
    return asked, answer


def test_no_model_by_that_name_means_the_first_version(registry):
    from google.auth.credentials import AnonymousCredentials

    asked, _ = registry
    got = vertex_models.latest_model(
        'cnn "v2"', "us-central1", project="p", credentials=AnonymousCredentials()
    )
    assert got is None
    (request,) = asked
    assert request["filter"] == 'display_name="cnn \\"v2\\""'  # the quotes escaped
    assert request["parent"] == "projects/p/locations/us-central1"


def test_the_newest_of_several_is_the_parent(registry):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1.types import Model

    asked, answer = registry
    answer += [Model(name=f"projects/p/locations/us-central1/models/{i}") for i in (9, 3)]
    got = vertex_models.latest_model("cnn", "us-central1", "p", AnonymousCredentials())
    assert got == "projects/p/locations/us-central1/models/9"
    assert asked[0]["order_by"] == "create_time desc"


@pytest.mark.parametrize("raw", ['cnn "v2"', "back\\slash", "naïve\nname", "tab\there"])
def test_a_name_spliced_between_gcpcs_quotes_comes_back_whole(raw):
    body = vertex_models.json_string_body(raw)
    assert json.loads('{"display_name": "' + body + '"}')["display_name"] == raw
    assert body.startswith(raw[0]) and body.endswith(raw[-1])  # no quote of its own left


def test_a_name_in_another_script_is_written_as_itself_not_as_escapes():
    """The step's `json_display_name` output is shown in the console: `naïve`, not `na\\u00efve`."""
    assert vertex_models.json_string_body("naïve модель") == "naïve модель"
