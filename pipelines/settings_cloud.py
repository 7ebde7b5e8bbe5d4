"""The checks of the cloud and cluster settings (Vertex AI, Kubeflow): formats only, no network.

`pipelines.settings` calls `first_problem` after its own checks; each problem is one line
naming the setting, its value and what is expected (secrets are named, never shown).
"""

from __future__ import annotations

import re
from typing import Any

MAX_DISPLAY_NAME = 128  # Vertex's limit on every resource's display name
KUBEFLOW_JOB_APIS = ("auto", "tfjob", "trainjob")  # `kubeflow_job_api`: the final job's API

_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_SERVICE_ACCOUNT = re.compile(
    r"^[a-z0-9-]+@[a-z0-9-]+\.iam\.gserviceaccount\.com$|^\d+-compute@developer\.gserviceaccount\.com$"
)
_KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_NETWORK = re.compile(r"^projects/[^/]+/global/networks/[^/]+$")
_MODEL = re.compile(r"^projects/[^/]+/locations/[^/]+/models/[^/@]+$")
_OBJECT_STORE = re.compile(r"^(gs|s3|minio)://[^/]+")
_URL = re.compile(r"^https?://[^\s/]+")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")
_COOKIE = re.compile(r"^[^=;\s]+=[^;\s]+(; ?[^=;\s]+=[^;\s]+)*$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


class _Bad(ValueError):
    """The first bad setting found; its message is the one line shown."""


def first_problem(s: Any) -> str | None:
    """The first cloud or cluster setting of `s` (a `Settings`) that is malformed, in one line."""
    try:
        _check(s)
    except _Bad as bad:
        return str(bad)
    return None


def _kubeflow_auth(s: Any) -> None:
    """One credential at most; secrets are named, never shown."""
    given = [
        n for n in ("kubeflow_token", "kubeflow_token_file", "kubeflow_cookie") if getattr(s, n)
    ]
    if len(given) > 1:
        raise _Bad(
            f"{', '.join(given)}: set together; give one Kubeflow Pipelines credential (a bearer "
            "token, a token file or the auth proxy's session cookie)"
        )
    if s.kubeflow_token and re.search(r"\s", s.kubeflow_token):
        raise _Bad("kubeflow_token: expected a bearer token without spaces (not shown)")
    if s.kubeflow_cookie and not _COOKIE.match(s.kubeflow_cookie):
        raise _Bad(
            "kubeflow_cookie: expected NAME=VALUE (e.g. oauth2_proxy_kubeflow=…, the auth "
            "proxy's session cookie; not shown)"
        )


def _check(s: Any) -> None:
    """Raise _Bad for the first malformed setting: where things are, credentials, who runs."""
    _check_places(s)
    _kubeflow_auth(s)
    _check_resources_and_identities(s)


def _need(s: Any, ok: bool, name: str, expected: str) -> None:
    if not ok:
        raise _Bad(f"{name}={getattr(s, name)!r}: expected {expected}")


def _check_places(s: Any) -> None:
    """The project, region, storage, cluster endpoint and namespace, volumes and waits."""
    _need(
        s,
        s.project is None or bool(_PROJECT.match(s.project)),
        "project",
        "a Google Cloud project id (6-30 lowercase letters, digits, hyphens)",
    )
    _need(s, bool(_REGION.match(s.region)), "region", "a Google Cloud region such as us-central1")
    _need(
        s,
        s.pipeline_root is None or bool(_OBJECT_STORE.match(s.pipeline_root)),
        "pipeline_root",
        "a gs:// URI (Vertex), or gs://, s3:// or minio:// (Kubeflow)",
    )
    _need(
        s,
        s.kubeflow_host is None or bool(_URL.match(s.kubeflow_host)),
        "kubeflow_host",
        "an http:// or https:// URL of the Kubeflow Pipelines API",
    )
    _need(s, bool(_DNS_LABEL.match(s.kubeflow_namespace)), "kubeflow_namespace", "a namespace name")
    _need(
        s,
        s.data_pvc is None or bool(_DNS_LABEL.match(s.data_pvc)),
        "data_pvc",
        "a PersistentVolumeClaim name (lowercase letters, digits, -)",
    )
    _need(s, s.data_mount_path.startswith("/"), "data_mount_path", "an absolute path")
    _need(s, s.kubeflow_timeout_s >= 60, "kubeflow_timeout_s", "an integer >= 60 (seconds)")
    _need(
        s,
        s.kubeflow_job_api in KUBEFLOW_JOB_APIS,
        "kubeflow_job_api",
        " | ".join(KUBEFLOW_JOB_APIS),
    )
    _need(
        s,
        s.kubeflow_pending_grace_s >= 30,
        "kubeflow_pending_grace_s",
        "an integer >= 30 (seconds)",
    )
    _need(
        s, s.kubeflow_trial_nodes >= 1, "kubeflow_trial_nodes", "an integer >= 1 (pods per trial)"
    )
    _need(
        s,
        s.model_registry_url is None or bool(_URL.match(s.model_registry_url)),
        "model_registry_url",
        "an http:// or https:// URL of a Kubeflow Model Registry",
    )


def _check_resources_and_identities(s: Any) -> None:
    """Pod resources, the identities and keys jobs run with, display names and labels."""
    _need(
        s, bool(_QUANTITY.match(s.kubeflow_cpu)), "kubeflow_cpu", "a CPU quantity such as 2 or 500m"
    )
    _need(
        s,
        bool(_QUANTITY.match(s.kubeflow_memory)),
        "kubeflow_memory",
        "a memory quantity such as 8Gi or 512Mi",
    )
    _need(
        s,
        s.service_account is None or bool(_SERVICE_ACCOUNT.match(s.service_account)),
        "service_account",
        "a service account e-mail (name@project.iam.gserviceaccount.com)",
    )
    _need(
        s,
        s.kms_key is None or bool(_KMS_KEY.match(s.kms_key)),
        "kms_key",
        "projects/P/locations/L/keyRings/R/cryptoKeys/K",
    )
    _need(
        s,
        s.network is None or bool(_NETWORK.match(s.network)),
        "network",
        "projects/NUMBER/global/networks/NAME",
    )
    _need(
        s,
        s.parent_model is None or bool(_MODEL.match(s.parent_model)),
        "parent_model",
        "projects/P/locations/L/models/ID",
    )
    for name in ("display_name", "model_display_name"):  # `-study`/`-final` are appended
        longest = len(getattr(s, name)) + (len("-study") if name == "display_name" else 0)
        _need(
            s,
            longest <= MAX_DISPLAY_NAME,
            name,
            f"at most {MAX_DISPLAY_NAME} characters with its suffix",
        )
    for key, value in s.labels.items():
        if not (_LABEL_KEY.match(key) and _LABEL_VALUE.match(str(value))):
            raise _Bad(
                f"labels={key}={value}: expected lowercase letters, digits, _ and - "
                "(keys start with a letter, at most 63 characters)"
            )
