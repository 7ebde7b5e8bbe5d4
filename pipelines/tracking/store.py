"""Which MLflow store a step writes to, checked before anything runs (no MLflow import).

The setting `tracking`: `auto` tracks where a store is known (the `tracking_uri` setting,
else the `MLFLOW_TRACKING_URI` that KFP 2.17+ sets in a task's container when its MLflow
integration is on) and says in one line why not when that store is unreachable; `mlflow`
is the same, except that no store, or an unreachable one, fails the step before any trial
runs; `off` tracks nothing. The local run gives `tracking_uri` its default, a SQLite file
under the run folder (`pipelines/targets/local/cli/run.py`). When the store is KFP's own, the study
run nests under the task's run (`MLFLOW_RUN_ID`).
"""

from __future__ import annotations

import dataclasses
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

MODES = ("auto", "mlflow", "vertex", "off")
VERTEX = "vertex"  # Vertex AI Experiments: the vertex target's fetch step, no MLflow store
URI_ENV = "MLFLOW_TRACKING_URI"  # set by KFP in a task's container (KEP-12862)
RUN_ENV = "MLFLOW_RUN_ID"  # the task's own run there
HEALTH_TIMEOUT_S = 5.0
LOCAL_DB = "mlflow.db"  # the local run's default store, in the run folder
ARTIFACTS = "mlflow-artifacts"  # beside a SQLite store: the runs' files


class TrackingError(RuntimeError):
    """Tracking was asked for and cannot be done; one line."""


@dataclasses.dataclass(frozen=True)
class Store:
    """A reachable MLflow store.

    Attributes:
        uri: The tracking URI.
        parent_run_id: The run the study nests under (KFP's task run), or "".
        artifact_root: Where a new experiment keeps its files ("" = the server decides).
    """

    uri: str
    parent_run_id: str = ""
    artifact_root: str = ""

    def ui_command(self) -> str:
        """The command that shows these runs."""
        if self.uri.startswith(("http://", "https://")):
            return self.uri
        return f"mlflow ui --backend-store-uri {self.uri}"


def absolute(uri: str) -> str:
    """`uri` with a SQLite file's relative path made absolute (a step runs in another folder)."""
    path = _sqlite_path(uri)
    if path is None or os.path.isabs(path):
        return uri
    return "sqlite:///" + os.path.abspath(path) + uri[len("sqlite:///") + len(path) :]


def local_default(run_folder: str) -> str:
    """The local run's default store: `sqlite:///<run folder>/mlflow.db` (absolute)."""
    return f"sqlite:///{os.path.abspath(os.path.join(run_folder, LOCAL_DB))}"


def open_store(
    mode: str,
    uri: str,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] = print,
) -> Store | None:
    """The store `mode` and `uri` name, checked; None: untracked (`say` tells why under auto).

    Raises:
        TrackingError: `mode` is unknown, or `mlflow` and no store is set or it is unreachable.
    """
    env = os.environ if env is None else env
    if mode not in MODES:
        raise TrackingError(f"tracking={mode!r}: expected one of {', '.join(MODES)}")
    if mode in ("off", VERTEX):
        return None
    kfp_uri = env.get(URI_ENV, "")
    uri = uri or kfp_uri
    if not uri:
        if mode == "mlflow":
            raise TrackingError(
                f"tracking=mlflow: no tracking_uri set and no {URI_ENV} in this step's environment"
            )
        return None
    problem = unreachable(uri)
    if problem:
        if mode == "mlflow":
            raise TrackingError(f"tracking_uri={uri}: {problem}; set tracking=auto to go on")
        say(f"tracking: {uri} {problem}; this run goes on untracked (tracking=auto)")
        return None
    parent = env.get(RUN_ENV, "") if uri == kfp_uri else ""
    return Store(uri, parent, _artifact_root(uri))


def _sqlite_path(uri: str) -> str | None:
    if not uri.startswith("sqlite:///"):
        return None
    return uri.removeprefix("sqlite:///").split("?")[0] or None


def _artifact_root(uri: str) -> str:
    """A SQLite store keeps its runs' files beside it (MLflow's default is `./mlruns`)."""
    path = _sqlite_path(uri)
    return os.path.join(os.path.dirname(path), ARTIFACTS) if path else ""


def unreachable(uri: str) -> str:
    """Why the store at `uri` cannot be written, or "" (a server: `/health`; a file: its folder)."""
    scheme = urllib.parse.urlparse(uri).scheme
    if scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S):
                return ""
        except (urllib.error.URLError, OSError, ValueError) as err:
            return f"is unreachable ({getattr(err, 'reason', err)})"
    sqlite = _sqlite_path(uri)
    if sqlite:
        folder = os.path.dirname(os.path.abspath(sqlite))
    elif scheme in ("", "file"):
        folder = os.path.abspath(uri.removeprefix("file://"))
    else:
        return ""  # another backend (a database server, Databricks): MLflow says at the write
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    return "" if os.access(folder, os.W_OK) else f"cannot be written ({folder} is read-only)"
