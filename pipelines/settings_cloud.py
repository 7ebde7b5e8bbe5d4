"""The cloud and Kubeflow sections of `Settings`, each checking its own fields (no network).

Each problem is one line naming the setting, its value and what is expected (secrets are
named, never shown). `pipelines/settings_sections.py` holds the other sections.
"""

from __future__ import annotations

import dataclasses
import re

from pipelines.settings_sections import SettingsError, need, need_match_if_set

MAX_DISPLAY_NAME = 128  # Vertex's limit on every resource's display name
KUBEFLOW_JOB_APIS = ("auto", "tfjob", "trainjob")  # `kubeflow_job_api`: the final job's API

_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_SERVICE_ACCOUNT = re.compile(
    r"^[a-z0-9-]+@[a-z0-9-]+\.iam\.gserviceaccount\.com$|^\d+-compute@developer\.gserviceaccount\.com$"
)
_KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_NETWORK = re.compile(r"^projects/[^/]+/global/networks/[^/]+$")
_TENSORBOARD = re.compile(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$")
_MODEL = re.compile(r"^projects/[^/]+/locations/[^/]+/models/[^/@]+$")
_OBJECT_STORE = re.compile(r"^(gs|s3|minio)://[^/]+")
_URL = re.compile(r"^https?://[^\s/]+")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A node label key=value: a key (an optional DNS prefix and a name) and a non-empty value.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_NODE_LABEL = re.compile(
    rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}={_LABEL_NAME}$"
)
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")
_COOKIE = re.compile(r"^[^=;\s]+=[^;\s]+(; ?[^=;\s]+=[^;\s]+)*$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class CloudSettings:
    """Where Vertex AI runs the pipeline, as whom, and what the run and its model are called."""

    project: str | None = None
    region: str = "us-central1"
    pipeline_root: str | None = None
    service_account: str | None = None
    network: str | None = None
    kms_key: str | None = None
    tensorboard: str | None = None  # a Vertex AI TensorBoard: the trial and final jobs' logs
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    experiment: str | None = None
    enable_caching: bool | None = None  # None: as compiled (kfp caches every task by default)
    display_name: str = "hpt-pipeline"
    model_display_name: str = ""  # empty: hpt-<model> (hpt-cnn; a reference: its function)
    parent_model: str | None = None  # projects/P/locations/L/models/ID: upload as its new version
    keep_default_version: bool = False  # True: a new version does not take the `default` alias

    def check(self) -> None:
        """The project, region and storage; the identities and keys; display names, labels."""
        need_match_if_set(
            self,
            "project",
            _PROJECT,
            "a Google Cloud project id (6-30 lowercase letters, digits, hyphens)",
        )
        need(
            self,
            bool(_REGION.match(self.region)),
            "region",
            "a Google Cloud region such as us-central1",
        )
        need_match_if_set(
            self,
            "pipeline_root",
            _OBJECT_STORE,
            "a gs:// URI (Vertex), or gs://, s3:// or minio:// (Kubeflow)",
        )
        self._check_identities()
        for name in ("display_name", "model_display_name"):  # `-study`/`-final` are appended
            longest = len(getattr(self, name)) + (len("-study") if name == "display_name" else 0)
            need(
                self,
                longest <= MAX_DISPLAY_NAME,
                name,
                f"at most {MAX_DISPLAY_NAME} characters with its suffix",
            )
        for key, value in self.labels.items():
            if not (_LABEL_KEY.match(key) and _LABEL_VALUE.match(str(value))):
                raise SettingsError(
                    f"labels={key}={value}: expected lowercase letters, digits, _ and - "
                    "(keys start with a letter, at most 63 characters)"
                )

    def _check_identities(self) -> None:
        """The service account, key, network and parent model, each in its resource form."""
        need_match_if_set(
            self,
            "service_account",
            _SERVICE_ACCOUNT,
            "a service account e-mail (name@project.iam.gserviceaccount.com)",
        )
        need_match_if_set(
            self, "kms_key", _KMS_KEY, "projects/P/locations/L/keyRings/R/cryptoKeys/K"
        )
        need_match_if_set(self, "network", _NETWORK, "projects/NUMBER/global/networks/NAME")
        need_match_if_set(self, "parent_model", _MODEL, "projects/P/locations/L/models/ID")
        need_match_if_set(
            self, "tensorboard", _TENSORBOARD, "projects/P/locations/L/tensorboards/ID"
        )
        if self.tensorboard and not self.service_account:
            raise SettingsError(
                f"tensorboard={self.tensorboard!r}: Vertex uploads a job's TensorBoard logs "
                "only as a service account; set service_account too"
            )


@dataclasses.dataclass(frozen=True)
class KubeflowSettings:
    """Open-source Kubeflow: Kubeflow Pipelines 2.x + Katib + Training Operator / Trainer."""

    kubeflow_host: str | None = None  # KFP API endpoint, e.g. http://localhost:8080
    kubeflow_namespace: str = "kubeflow"  # where Experiments, Trials and TFJobs are created
    kubeflow_service_account: str | None = None  # pods of trials and replicas run as it
    data_pvc: str | None = None  # a PVC holding datasets and models, instead of object storage
    # Where data_pvc is mounted in every pod (Kubeflow's manifest builders take it by this
    # name). The pipeline parameter `shared_root` carries it, empty without data_pvc.
    data_mount_path: str = "/mnt/hpt"
    kubeflow_cpu: str = "2"  # CPU request/limit of a trial or replica pod (Kubernetes quantity)
    kubeflow_memory: str = "8Gi"  # memory request/limit of a trial or replica pod
    model_registry_url: str | None = None  # Kubeflow Model Registry, e.g. https://mr.example:443
    kubeflow_timeout_s: int = 24 * 3600  # how long the tune and train steps wait for Katib/TFJob
    # The final job's Kubernetes API: the Training Operator v1's TFJob, or Kubeflow Trainer
    # v2's TrainJob (Kubeflow 1.11+); auto takes what the cluster serves (TFJob first):
    # pipelines/targets/kubeflow/job_api.py resolves it.
    kubeflow_job_api: str = "auto"
    kubeflow_pending_grace_s: int = 600  # a trial/replica pod Pending longer stops the step
    # The node label (key=value) of the spot node pool: trial_scheduling/final_scheduling spot
    # pods get it as a node selector and tolerate its taint (pipelines/targets/kubeflow/spot.py)
    kubeflow_spot_node_label: str = "cloud.google.com/gke-spot=true"
    # The older name of trial_workers + 1 (pods per Katib trial); read into trial_workers by
    # `Settings` and None after that: read `training.trial_workers`.
    kubeflow_trial_nodes: int | None = None
    # Kubeflow Pipelines API credentials (one at most; never shown in messages or repr)
    kubeflow_token: str | None = dataclasses.field(default=None, repr=False)  # bearer token
    kubeflow_token_file: str | None = None  # a token file re-read per request (projected SA token)
    kubeflow_cookie: str | None = dataclasses.field(default=None, repr=False)  # auth proxy session

    def check(self) -> None:
        """The endpoint, namespace, volume, waits and API, credentials, pod resources."""
        self._check_places()
        self._check_auth()
        need(
            self,
            bool(_QUANTITY.match(self.kubeflow_cpu)),
            "kubeflow_cpu",
            "a CPU quantity such as 2 or 500m",
        )
        need(
            self,
            bool(_QUANTITY.match(self.kubeflow_memory)),
            "kubeflow_memory",
            "a memory quantity such as 8Gi or 512Mi",
        )

    def _check_places(self) -> None:
        """The cluster endpoint and namespace, volumes, waits and APIs."""
        need_match_if_set(
            self, "kubeflow_host", _URL, "an http:// or https:// URL of the Kubeflow Pipelines API"
        )
        need(
            self,
            bool(_DNS_LABEL.match(self.kubeflow_namespace)),
            "kubeflow_namespace",
            "a namespace name",
        )
        need_match_if_set(
            self,
            "data_pvc",
            _DNS_LABEL,
            "a PersistentVolumeClaim name (lowercase letters, digits, -)",
        )
        need(self, self.data_mount_path.startswith("/"), "data_mount_path", "an absolute path")
        need(
            self, self.kubeflow_timeout_s >= 60, "kubeflow_timeout_s", "an integer >= 60 (seconds)"
        )
        need(
            self,
            self.kubeflow_job_api in KUBEFLOW_JOB_APIS,
            "kubeflow_job_api",
            " | ".join(KUBEFLOW_JOB_APIS),
        )
        need(
            self,
            self.kubeflow_pending_grace_s >= 30,
            "kubeflow_pending_grace_s",
            "an integer >= 30 (seconds)",
        )
        need(
            self,
            self.kubeflow_trial_nodes is None or self.kubeflow_trial_nodes >= 1,
            "kubeflow_trial_nodes",
            "an integer >= 1 (pods per trial; say trial_workers: the pods besides the first)",
        )
        need(
            self,
            bool(_NODE_LABEL.match(self.kubeflow_spot_node_label)),
            "kubeflow_spot_node_label",
            "key=value, the node label of the spot pool, such as cloud.google.com/gke-spot=true",
        )
        need_match_if_set(
            self,
            "model_registry_url",
            _URL,
            "an http:// or https:// URL of a Kubeflow Model Registry",
        )

    def _check_auth(self) -> None:
        """One credential at most; secrets are named, never shown."""
        given = [
            n
            for n in ("kubeflow_token", "kubeflow_token_file", "kubeflow_cookie")
            if getattr(self, n)
        ]
        if len(given) > 1:
            raise SettingsError(
                f"{', '.join(given)}: set together; give one Kubeflow Pipelines credential (a "
                "bearer token, a token file or the auth proxy's session cookie)"
            )
        if self.kubeflow_token and re.search(r"\s", self.kubeflow_token):
            raise SettingsError(
                "kubeflow_token: expected a bearer token without spaces (not shown)"
            )
        if self.kubeflow_cookie and not _COOKIE.match(self.kubeflow_cookie):
            raise SettingsError(
                "kubeflow_cookie: expected NAME=VALUE (e.g. oauth2_proxy_kubeflow=…, the auth "
                "proxy's session cookie; not shown)"
            )
