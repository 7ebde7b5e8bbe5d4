"""Kubeflow Pipelines credentials: `kfp.Client` built for each auth mode, headers read offline.

Only the HTTP call is replaced (urllib3's `PoolManager.request`, under kfp_server_api's REST
client), so what is checked is the request `kfp.Client` itself would send. And `submit
--target kubeflow` refuses, offline, a run whose pods could read no data.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import urllib3
from typer.testing import CliRunner

from pipelines.app.cloud_commands import schedule_app, submit
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.targets.kubeflow import client as kfp_client
from tests.test_kubeflow_client import HOST, IMAGES, NAMESPACE, app, invoke, one_line_error

__all__ = ["schedule_app", "submit"]  # the app under test registers them


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("HPT_", "KF_PIPELINES")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/kfp/context.json
    # kfp's in-cluster token file: absent unless a test writes it.
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(tmp_path / "no-token"))


class Wire:
    """urllib3's request, replaced: records method, URL and headers; answers a healthz body.

    Every call is bound to the real `PoolManager.request` signature first, so a call the
    real method would refuse fails here too.
    """

    REAL = inspect.signature(urllib3.PoolManager.request)

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    def request(self, pool: Any, *args: Any, **kwargs: Any) -> Any:
        bound = self.REAL.bind(pool, *args, **kwargs).arguments
        self.sent.append((bound["method"], bound["url"], dict(bound.get("headers") or {})))
        body = json.dumps({"multi_user": True}).encode()
        return urllib3.HTTPResponse(
            body=body, status=200, headers={"content-type": "application/json"}
        )


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    fake = Wire()
    monkeypatch.setattr(
        urllib3.PoolManager, "request", lambda pool, *a, **k: fake.request(pool, *a, **k)
    )
    return fake


def headers_sent(wire: Wire, **settings: Any) -> dict[str, str]:
    """Build the client as `submit` does, make one API call, return its headers."""
    client = kfp_client.connect(
        Settings(kubeflow_host=HOST, kubeflow_namespace=NAMESPACE, **settings)
    )
    client.get_kfp_healthz()
    method, url, headers = wire.sent[-1]
    assert (method, url) == ("GET", f"{HOST}/apis/v2beta1/healthz")
    return {k.lower(): v for k, v in headers.items()}


def test_a_bearer_token_is_sent_as_authorization(wire: Wire) -> None:
    headers = headers_sent(wire, kubeflow_token="eyJhbGciOi.token.sig")
    assert headers["authorization"] == "Bearer eyJhbGciOi.token.sig"
    assert "cookie" not in headers


def test_the_auth_proxy_session_cookie_is_sent_as_cookie(wire: Wire) -> None:
    headers = headers_sent(wire, kubeflow_cookie="oauth2_proxy_kubeflow=c2Vzc2lvbg")
    assert headers["cookie"] == "oauth2_proxy_kubeflow=c2Vzc2lvbg"
    assert "authorization" not in headers


def test_a_token_file_is_read_before_every_request(wire: Wire, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    client = kfp_client.connect(
        Settings(kubeflow_host=HOST, kubeflow_namespace=NAMESPACE, kubeflow_token_file=str(token))
    )
    client.get_kfp_healthz()
    token.write_text("rotated-token\n")  # the kubelet refreshes projected tokens
    client.get_kfp_healthz()
    assert [h["authorization"] for _, _, h in wire.sent] == [
        "Bearer first-token",
        "Bearer rotated-token",
    ]


def test_in_a_pod_kfps_service_account_token_file_is_used(
    wire: Wire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "sa-token"
    token.write_text("projected-sa-token")
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(token))
    assert headers_sent(wire)["authorization"] == "Bearer projected-sa-token"


def test_without_a_credential_no_identity_is_sent(wire: Wire) -> None:
    headers = headers_sent(wire)
    assert "authorization" not in headers and "cookie" not in headers


def test_credentials_come_from_flags_settings_or_environment(tmp_path: Path) -> None:
    config = tmp_path / "kubeflow.yaml"
    config.write_text("kubeflow_cookie: oauth2_proxy_kubeflow=abc\n")
    assert load_settings(config=config).kubeflow.kubeflow_cookie == "oauth2_proxy_kubeflow=abc"
    env = {"HPT_KUBEFLOW_TOKEN": "from-env"}
    assert load_settings(environ=env).kubeflow.kubeflow_token == "from-env"
    assert "from-env" not in repr(load_settings(environ=env))  # never printed


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            dict(kubeflow_token="a", kubeflow_cookie="x=y"),
            "kubeflow_token, kubeflow_cookie: set together; give one",
        ),
        (dict(kubeflow_token="two words"), "kubeflow_token: expected a bearer token without"),
        (dict(kubeflow_cookie="no-equals-sign"), "kubeflow_cookie: expected NAME=VALUE"),
    ],
)
def test_bad_credentials_are_one_line_without_the_secret(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        Settings(**settings)
    assert "two words" not in str(err.value) and "no-equals-sign" not in str(err.value)


def test_a_missing_token_file_is_one_line(tmp_path: Path) -> None:
    settings = Settings(kubeflow_host=HOST, kubeflow_token_file=str(tmp_path / "absent"))
    with pytest.raises(SettingsError, match=r"kubeflow_token_file=.*absent: no such file"):
        kfp_client.connect(settings)


def test_the_token_flag_reaches_the_request(wire: Wire) -> None:
    result = CliRunner().invoke(
        app,
        [
            "schedule",
            "list",
            "--target=kubeflow",
            f"--host={HOST}",
            f"--namespace={NAMESPACE}",
            "--token=cli-token",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert wire.sent and all(h["authorization"] == "Bearer cli-token" for _, _, h in wire.sent)


def test_the_token_flag_is_refused_for_vertex() -> None:
    result = invoke("schedule", "list", "--token=abc")
    one_line_error(result, "--token: only used with --target kubeflow")


def test_a_dry_run_with_no_readable_data_location_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPT_TRAINER_IMAGE", IMAGES["trainer"])
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", IMAGES["components"])
    out = tmp_path / "run.json"
    base = ["submit", "--target=kubeflow", f"--host={HOST}", "--dry-run", f"--output={out}"]
    base.append("--namespace=team-a")  # `kubeflow` itself is refused first
    for root in ([], ["--pipeline-root=minio://mlpipeline/hpt"], ["--pipeline-root=s3://b/hpt"]):
        result = invoke(*base, *root)
        one_line_error(result, "and no data_pvc: the Katib trials and the TFJob could not read")
        assert (
            "set data_pvc to a ReadWriteMany PersistentVolumeClaim, or pipeline_root to a gs://"
            in result.stderr
        )
        assert not out.exists()  # nothing half-written
