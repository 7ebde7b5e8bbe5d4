"""Kubeflow credentials in the settings: one at most, each well formed, none ever shown.

Written to kill mutmut's survivors in `pipelines/settings_cloud.py` (docs/mutation.md):
the refusal a user gets from `Settings(...)` (as `hpt-pipeline` builds it), whole.
"""

from __future__ import annotations

import pytest

from pipelines.settings import Settings, SettingsError

TWO = "give one Kubeflow Pipelines credential (a bearer token, a token file or the auth proxy's "
REFUSED = {
    "token and cookie": (
        {"kubeflow_token": "abc", "kubeflow_cookie": "a=b"},
        f"kubeflow_token, kubeflow_cookie: set together; {TWO}session cookie)",
    ),
    "all three": (
        {"kubeflow_token": "abc", "kubeflow_token_file": "/t", "kubeflow_cookie": "a=b"},
        f"kubeflow_token, kubeflow_token_file, kubeflow_cookie: set together; {TWO}session cookie)",
    ),
    "a token with a space": (
        {"kubeflow_token": "ab c"},
        "kubeflow_token: expected a bearer token without spaces (not shown)",
    ),
    "a token with a tab": (
        {"kubeflow_token": "ab\tc"},
        "kubeflow_token: expected a bearer token without spaces (not shown)",
    ),
    "a cookie without a value": (
        {"kubeflow_cookie": "session"},
        "kubeflow_cookie: expected NAME=VALUE (e.g. oauth2_proxy_kubeflow=…, the auth proxy's "
        "session cookie; not shown)",
    ),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_kubeflow_credential_set_wrong_is_refused_whole_and_never_shown(case):
    given, expected = REFUSED[case]
    with pytest.raises(SettingsError) as err:
        Settings(**given)
    assert str(err.value) == expected
    assert "ab c" not in str(err.value) and "session\n" not in str(err.value)


@pytest.mark.parametrize(
    "given",
    [
        {"kubeflow_token": "abc"},
        {"kubeflow_token_file": "/var/run/token"},
        {"kubeflow_cookie": "oauth2_proxy_kubeflow=abc"},
        {"kubeflow_cookie": "a=b; c=d"},
    ],
)
def test_one_well_formed_kubeflow_credential_is_taken(given):
    settings = Settings(**given)
    assert all(settings.value(k) == v for k, v in given.items())
