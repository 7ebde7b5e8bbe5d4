"""Vertex AI's Metadata, TensorBoard and Pipeline services, in memory, for `aiplatform`'s SDK.

`FakeVertex(monkeypatch)` replaces the gapic methods `aiplatform` calls when it writes
Experiments (`google.cloud.aiplatform_v1`'s clients: nothing leaves the process). Every
call's request is parsed strictly into its `aiplatform_v1` request type (an unknown field,
a wrong type or a message of another API version fails the test), kept in `requests`, and
answered from what earlier calls created, as the service would: a missing resource is
`NotFound`, a second create `AlreadyExists`, a child
added again skipped.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

PROJECT, LOCATION = "proj", "us-central1"
WHERE = f"projects/{PROJECT}/locations/{LOCATION}"
STORE = f"{WHERE}/metadataStores/default"
PIPELINE_JOB = f"{WHERE}/pipelineJobs/hpt-pipeline-20260102"
PIPELINE_CONTEXT = f"{STORE}/contexts/hpt-pipeline-20260102"

_METADATA = (
    "get_metadata_store",
    "create_context",
    "get_context",
    "update_context",
    "add_context_children",
    "add_context_artifacts_and_executions",
    "create_artifact",
    "get_artifact",
    "get_execution",
)
_TENSORBOARD = (
    "get_tensorboard",
    "get_tensorboard_experiment",
    "create_tensorboard_experiment",
    "get_tensorboard_run",
    "create_tensorboard_run",
    "list_tensorboard_time_series",
    "create_tensorboard_time_series",
    "write_tensorboard_run_data",
)


def _request_type(method: str) -> Any:
    from google.cloud import aiplatform_v1

    return getattr(aiplatform_v1, "".join(w.title() for w in method.split("_")) + "Request")


class FakeVertex:
    """The services, holding what was created; `requests`: `(method, request)` in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import google.auth
        from google.auth.credentials import AnonymousCredentials
        from google.cloud.aiplatform_v1.services.metadata_service import MetadataServiceClient
        from google.cloud.aiplatform_v1.services.pipeline_service import PipelineServiceClient
        from google.cloud.aiplatform_v1.services.tensorboard_service import (
            TensorboardServiceClient,
        )

        self.requests: list[tuple[str, Any]] = []
        self.nodes: dict[str, Any] = {}  # resource name -> message
        self.children: dict[str, list[str]] = {}
        self._ids = 0
        monkeypatch.setattr(
            google.auth, "default", lambda *a, **k: (AnonymousCredentials(), PROJECT)
        )
        for client, methods in (
            (MetadataServiceClient, _METADATA),
            (TensorboardServiceClient, _TENSORBOARD),
            (PipelineServiceClient, ("get_pipeline_job",)),
        ):
            for method in methods:
                monkeypatch.setattr(client, method, self._method(method))

    def _method(self, method: str) -> Any:
        kind = _request_type(method)

        def call(_client: Any, request: Any = None, **fields: Any) -> Any:
            for name in ("retry", "timeout", "metadata"):
                fields.pop(name, None)
            built = kind(request) if request is not None else kind(**fields)
            strict = kind.from_json(kind.to_json(built), ignore_unknown_fields=False)
            self.requests.append((method, strict))
            return getattr(self, method)(strict)

        return call

    def of(self, method: str) -> list[Any]:
        """The requests of `method`, in order."""
        return [request for name, request in self.requests if name == method]

    def _get(self, name: str) -> Any:
        from google.api_core.exceptions import NotFound

        if name not in self.nodes:
            raise NotFound(f"{name} not found")
        return type(self.nodes[name])(self.nodes[name])

    def _create(self, message: Any, name: str) -> Any:
        from google.api_core.exceptions import AlreadyExists

        if name in self.nodes:
            raise AlreadyExists(f"{name} already exists")
        made = type(message)(message)
        made.name = name
        self.nodes[name] = made
        return type(made)(made)

    # MetadataService
    def get_metadata_store(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import MetadataStore

        return MetadataStore(name=request.name)

    def create_context(self, request: Any) -> Any:
        return self._create(request.context, f"{request.parent}/contexts/{request.context_id}")

    def get_context(self, request: Any) -> Any:
        return self._get(request.name)

    def update_context(self, request: Any) -> Any:
        self._get(request.context.name)
        self.nodes[request.context.name] = type(request.context)(request.context)
        return self._get(request.context.name)

    def add_context_children(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import AddContextChildrenResponse

        for child in (request.context, *request.child_contexts):
            self._get(child)
        known = self.children.setdefault(request.context, [])
        known += [c for c in request.child_contexts if c not in known]  # the rest are skipped
        return AddContextChildrenResponse()

    def add_context_artifacts_and_executions(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import AddContextArtifactsAndExecutionsResponse

        for name in (request.context, *request.artifacts, *request.executions):
            self._get(name)
        self.children.setdefault(request.context, []).extend(request.artifacts)
        return AddContextArtifactsAndExecutionsResponse()

    def create_artifact(self, request: Any) -> Any:
        return self._create(request.artifact, f"{request.parent}/artifacts/{request.artifact_id}")

    def get_artifact(self, request: Any) -> Any:
        return self._get(request.name)

    def get_execution(self, request: Any) -> Any:  # aiplatform's look for a pre-GA run
        return self._get(request.name)

    # TensorboardService
    def get_tensorboard(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import Tensorboard

        if request.name not in self.nodes:
            self.nodes[request.name] = Tensorboard(name=request.name, display_name="team")
        return self._get(request.name)

    def get_tensorboard_experiment(self, request: Any) -> Any:
        return self._get(request.name)

    def create_tensorboard_experiment(self, request: Any) -> Any:
        name = f"{request.parent}/experiments/{request.tensorboard_experiment_id}"
        return self._create(request.tensorboard_experiment, name)

    def get_tensorboard_run(self, request: Any) -> Any:
        return self._get(request.name)

    def create_tensorboard_run(self, request: Any) -> Any:
        name = f"{request.parent}/runs/{request.tensorboard_run_id}"
        return self._create(request.tensorboard_run, name)

    def list_tensorboard_time_series(self, request: Any) -> Any:
        prefix = f"{request.parent}/timeSeries/"
        return [self._get(n) for n in self.nodes if n.startswith(prefix)]

    def create_tensorboard_time_series(self, request: Any) -> Any:
        self._ids += 1
        return self._create(
            request.tensorboard_time_series, f"{request.parent}/timeSeries/{self._ids}"
        )

    def write_tensorboard_run_data(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import WriteTensorboardRunDataResponse

        self._get(request.tensorboard_run)
        for series in request.time_series_data:
            self._get(f"{request.tensorboard_run}/timeSeries/{series.tensorboard_time_series_id}")
        return WriteTensorboardRunDataResponse()

    # PipelineService
    def get_pipeline_job(self, request: Any) -> Any:
        from google.cloud.aiplatform_v1 import Context, PipelineJob, PipelineJobDetail

        if PIPELINE_CONTEXT not in self.nodes:
            self.nodes[PIPELINE_CONTEXT] = Context(
                name=PIPELINE_CONTEXT, schema_title="system.PipelineRun"
            )
        detail = PipelineJobDetail(pipeline_run_context=self._get(PIPELINE_CONTEXT))
        return PipelineJob(name=request.name, job_detail=detail)

    def time_series(self, run: str) -> dict[str, list[tuple[int, float]]]:
        """What `write_tensorboard_run_data` wrote for the TensorBoard run whose id is `run`."""
        names = {
            n.rsplit("/", 1)[-1]: m.display_name
            for n, m in self.nodes.items()
            if re.search(f"/runs/{run}/timeSeries/[^/]+$", n)
        }
        out: dict[str, list[tuple[int, float]]] = {}
        for request in self.of("write_tensorboard_run_data"):
            if not request.tensorboard_run.endswith(f"/runs/{run}"):
                continue
            for series in request.time_series_data:
                points = out.setdefault(names[series.tensorboard_time_series_id], [])
                points += [(int(p.step), p.scalar.value) for p in series.values]
        return out
