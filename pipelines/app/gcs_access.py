"""Before a local run reads gs://: credentials found and the bucket readable, said in one line.

The data step reads a gs:// source with TensorFlow, which looks for credentials the way
Google's client libraries do (Application Default Credentials): `$GOOGLE_APPLICATION_
CREDENTIALS`, then gcloud's `application_default_credentials.json` (under
`$CLOUDSDK_CONFIG`, default `~/.config/gcloud`), then the Compute Engine metadata server.
Off Google Cloud that last probe takes seconds of retries before anything fails, so it is
only made where a metadata server can be: `GCE_METADATA_HOST` (or `GCE_METADATA_ROOT`) set,
or a Google machine (`/sys/class/dmi/id/product_name`), and not `NO_GCE_CHECK=true`.
Without any of these, no network call is made and the line says how to provide credentials.

With credentials, one request per gs:// value: a source is listed (its image objects are
counted, which the disk check uses), a weights file's object is read. A 403, a 404, an
empty folder or an unreachable host is one line naming the value. `STORAGE_EMULATOR_HOST`
(the Cloud Storage clients' convention) points these requests at another endpoint; the
data step itself always reads from Google.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pipelines.settings import Settings, SettingsError

ENDPOINT = "https://storage.googleapis.com"
ENDPOINT_ENV = "STORAGE_EMULATOR_HOST"
CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
METADATA_ENVS = ("GCE_METADATA_HOST", "GCE_METADATA_ROOT")
NO_GCE_CHECK_ENV = "NO_GCE_CHECK"
GOOGLE_MACHINE_FILE = "/sys/class/dmi/id/product_name"
SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
HOW = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
    "to a service account key file"
)
TIMEOUT_S = 20.0  # one listing page or one object's metadata, token refresh included
PAGE = 1000  # objects per listing page (the JSON API's largest)
MAX_PAGES = 100  # a listing stops there: the image count is then a lower bound


class GcsAccessError(SettingsError):
    """A gs:// value this machine cannot read; the message is one line."""


def gcloud_adc_file() -> Path:
    """Where `gcloud auth application-default login` writes its credentials."""
    config = os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud")
    return Path(config) / "application_default_credentials.json"


def metadata_server_possible() -> bool:
    """Whether a Compute Engine metadata server may answer here (no network call made)."""
    if os.environ.get(NO_GCE_CHECK_ENV) == "true":
        return False
    if any(os.environ.get(name) for name in METADATA_ENVS):
        return True
    try:
        return Path(GOOGLE_MACHINE_FILE).read_text().strip().startswith("Google")
    except OSError:
        return False


def credentials(value: str) -> Any:
    """Application Default Credentials for reading `value`, found without a blind probe.

    Raises:
        GcsAccessError: None to be found, or the file found cannot be used.
    """
    if not (
        os.environ.get(CREDENTIALS_ENV) or gcloud_adc_file().is_file() or metadata_server_possible()
    ):
        raise GcsAccessError(
            f"{value}: no Google Cloud credentials on this machine ({CREDENTIALS_ENV} unset, "
            f"no {gcloud_adc_file()}, not on Google Cloud); {HOW}"
        )
    import google.auth
    from google.auth.exceptions import GoogleAuthError

    try:
        found, _ = google.auth.default(scopes=[SCOPE])
    except GoogleAuthError as err:
        raise GcsAccessError(
            f"{value}: Google Cloud credentials: {_first_line(err)}; {HOW}"
        ) from None
    return found


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, object name or prefix) of a gs:// URI."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name


def count_images(value: str, session: Any) -> int:
    """Image objects under a gs:// folder `value` (its listing, page by page).

    Raises:
        GcsAccessError: Not readable, no such bucket, or nothing there.
    """
    from trainer.contract import IMAGE_EXTENSIONS

    uri = value.split("=", 1)[1]
    bucket, prefix = split_uri(uri.rstrip("/"))
    prefix = f"{prefix}/" if prefix else ""
    url = f"{endpoint()}/storage/v1/b/{quote(bucket, safe='')}/o"
    params = {"prefix": prefix, "maxResults": PAGE, "fields": "items(name),nextPageToken"}
    objects = images = 0
    for _ in range(MAX_PAGES):
        page = _get(session, url, params, value, f"list gs://{bucket}")
        names = [item["name"] for item in page.get("items", [])]
        objects += len(names)
        images += sum(1 for name in names if name.lower().endswith(IMAGE_EXTENSIONS))
        params["pageToken"] = page.get("nextPageToken")
        if not params["pageToken"]:
            break
    if objects == 0:
        raise GcsAccessError(f"{value}: no objects under it (expected an image folder)")
    return images


def check_object(value: str, session: Any) -> None:
    """Refuse a gs:// file `value` that is not there or not readable.

    Raises:
        GcsAccessError: Naming the value and the service's reason.
    """
    bucket, name = split_uri(value.split("=", 1)[1])
    url = f"{endpoint()}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
    _get(session, url, {"fields": "name,size"}, value, "read it")


def endpoint() -> str:
    """The JSON API's root: Google's, or `$STORAGE_EMULATOR_HOST`'s."""
    return (os.environ.get(ENDPOINT_ENV) or ENDPOINT).rstrip("/")


def _get(session: Any, url: str, params: dict, value: str, doing: str) -> dict:
    import requests
    from google.auth.exceptions import GoogleAuthError

    try:
        response = session.get(url, params=params, timeout=TIMEOUT_S)
    except GoogleAuthError as err:  # the token could not be had
        raise GcsAccessError(
            f"{value}: Google Cloud credentials: {_first_line(err)}; {HOW}"
        ) from None
    except requests.RequestException as err:
        host = endpoint().split("://")[-1]
        raise GcsAccessError(
            f"{value}: {host} is unreachable ({type(err).__name__}); connect to the network"
        ) from None
    if response.status_code == 200:
        return response.json()
    reason = _reason(response)
    if response.status_code in (401, 403):
        raise GcsAccessError(
            f"{value}: these credentials may not {doing} ({response.status_code}: {reason}); "
            "grant them roles/storage.objectViewer on the bucket, or use other credentials"
        )
    if response.status_code == 404:
        raise GcsAccessError(f"{value}: no such bucket or object (404: {reason})")
    raise GcsAccessError(f"{value}: Cloud Storage answered {response.status_code} ({reason})")


def _reason(response: Any) -> str:
    try:
        said = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        said = response.text or response.reason or ""
    return " ".join(str(said).split())[:200] or "no reason given"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def check_gcs(settings: Settings) -> int | None:
    """Check every gs:// value of a local run; the source's image count, if it is gs://.

    Raises:
        GcsAccessError: The first value that cannot be read, in one line.
    """
    values = [
        f"{flag}={value}"
        for flag, value in (
            ("--source", settings.data.source),
            ("--weights", settings.architecture.weights),
        )
        if value and value.startswith("gs://")
    ]
    if settings.local.output.startswith("gs://"):
        raise GcsAccessError(
            f"--output={settings.local.output}: a local run writes on this machine; expected a "
            "local "
            "folder (a gs:// pipeline_root is the vertex target's)"
        )
    return check_values(values)


def check_values(values: list[str]) -> int | None:
    """Read each `--flag=gs://…` value; the image count of the `--source` one, if any.

    Raises:
        GcsAccessError: The first value that cannot be read, in one line.
    """
    if not values:
        return None
    from google.auth.transport.requests import AuthorizedSession

    session = AuthorizedSession(credentials(values[0]))
    images = None
    for value in values:
        if value.startswith("--source="):
            images = count_images(value, session)
        else:
            check_object(value, session)
    return images
