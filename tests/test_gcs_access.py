"""gs:// access is checked before the data is prepared, in one line (issue 42, case 4).

Only HTTP is faked (`tests.fake_gcs`): real key files, real google-auth, real requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.app import cli, gcs_access
from pipelines.settings import LOCAL_RUN_DEFAULTS, Settings
from pipelines.targets.local.cli import preflight as local_preflight
from tests.fake_gcs import FakeGcs

IMAGES = ["images/cats/1.png", "images/cats/2.jpg", "images/dogs/3.png", "images/README.txt"]


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """No credentials anywhere, not on Google Cloud, and a metadata probe fails the test."""
    from google.auth.compute_engine import _metadata

    unset = (gcs_access.CREDENTIALS_ENV, gcs_access.NO_GCE_CHECK_ENV, *gcs_access.METADATA_ENVS)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no ADC file there
    monkeypatch.setattr(gcs_access, "GOOGLE_MACHINE_FILE", str(tmp_path / "product_name"))

    def probed(*_, **__):
        raise AssertionError("the metadata server was probed")

    monkeypatch.setattr(_metadata, "ping", probed)


@pytest.fixture
def gcs(tmp_path, monkeypatch, no_credentials):
    """A fake Cloud Storage, and a service account key whose tokens it issues."""
    with FakeGcs() as fake:
        fake.buckets = {"data": IMAGES, "empty": [], "locked": 403}
        monkeypatch.setenv(gcs_access.ENDPOINT_ENV, fake.url)
        monkeypatch.setenv(gcs_access.CREDENTIALS_ENV, str(fake.key_file(tmp_path)))
        yield fake


def _settings(tmp_path: Path, **values) -> Settings:
    return Settings(**{**LOCAL_RUN_DEFAULTS, "output": str(tmp_path / "out"), **values})


def test_a_readable_gs_folder_passes_and_its_images_are_counted(tmp_path, gcs):
    images = gcs_access.check_gcs(_settings(tmp_path, source="gs://data/images"))

    assert images == 3  # the README is no image
    assert gcs.requests[0] == "POST /token"  # the key's own token exchange
    assert gcs.requests[1].startswith("GET /storage/v1/b/data/o?prefix=images%2F")


def test_a_listing_of_many_pages_is_counted_whole(tmp_path, gcs, monkeypatch):
    monkeypatch.setattr(gcs_access, "PAGE", 2)
    gcs.buckets["data"] = [f"images/c{i % 2}/{i}.png" for i in range(7)]

    assert gcs_access.check_gcs(_settings(tmp_path, source="gs://data/images/")) == 7
    assert sum(r.startswith("GET") for r in gcs.requests) == 4


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "gs://locked/images",
            "--source=gs://locked/images: these credentials may not list gs://locked (403: "
            "trainer@ does not have storage.objects.list access); grant them "
            "roles/storage.objectViewer on the bucket, or use other credentials",
        ),
        (
            "gs://nobucket/images",
            "--source=gs://nobucket/images: no such bucket or object (404: The specified "
            "bucket does not exist.)",
        ),
        (
            "gs://empty/images",
            "--source=gs://empty/images: no objects under it (expected an image folder)",
        ),
    ],
)
def test_an_unreadable_gs_source_is_one_line(tmp_path, gcs, source, said):
    with pytest.raises(gcs_access.GcsAccessError) as refused:
        gcs_access.check_gcs(_settings(tmp_path, source=source))
    assert str(refused.value) == said


def test_no_credentials_is_one_line_with_no_network_call(tmp_path, no_credentials):
    with pytest.raises(gcs_access.GcsAccessError) as refused:
        gcs_access.check_gcs(_settings(tmp_path, source="gs://data/images"))
    assert str(refused.value) == (
        "--source=gs://data/images: no Google Cloud credentials on this machine "
        f"(GOOGLE_APPLICATION_CREDENTIALS unset, no {tmp_path}/gcloud/"
        "application_default_credentials.json, not on Google Cloud); run `gcloud auth "
        "application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service "
        "account key file"
    )


def test_a_credentials_file_that_is_not_there_is_one_line(tmp_path, no_credentials, monkeypatch):
    monkeypatch.setenv(gcs_access.CREDENTIALS_ENV, str(tmp_path / "nokey.json"))
    with pytest.raises(gcs_access.GcsAccessError) as refused:
        gcs_access.check_gcs(_settings(tmp_path, source="gs://data/images"))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("--source=gs://data/images: Google Cloud credentials: File ")
    assert "nokey.json was not found" in message


def test_where_a_metadata_server_may_answer(tmp_path, no_credentials, monkeypatch):
    assert not gcs_access.metadata_server_possible()
    machine = tmp_path / "product_name"
    machine.write_text("Google Compute Engine\n")
    assert gcs_access.metadata_server_possible()
    monkeypatch.setenv(gcs_access.NO_GCE_CHECK_ENV, "true")
    assert not gcs_access.metadata_server_possible()
    machine.write_text("Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.delenv(gcs_access.NO_GCE_CHECK_ENV)
    assert not gcs_access.metadata_server_possible()
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:1")
    assert gcs_access.metadata_server_possible()


def test_gs_weights_are_read_before_the_run(tmp_path, gcs):
    gcs.buckets["weights"] = ["backbone.weights.h5"]
    model = "mobilenet_v3_small"
    ok = _settings(tmp_path, model=model, weights="gs://weights/backbone.weights.h5")
    assert gcs_access.check_gcs(ok) is None  # read, and no gs:// source to count
    assert gcs.requests[-1].startswith("GET /storage/v1/b/weights/o/backbone.weights.h5?")

    missing = _settings(tmp_path, model=model, weights="gs://weights/other.h5")
    with pytest.raises(gcs_access.GcsAccessError) as refused:
        gcs_access.check_gcs(missing)
    assert str(refused.value) == (
        "--weights=gs://weights/other.h5: no such bucket or object (404: No such object)"
    )


def test_a_gs_output_is_refused_for_a_local_run(tmp_path, no_credentials):
    with pytest.raises(gcs_access.GcsAccessError, match=r"^--output=gs://b/run: a local run"):
        gcs_access.check_gcs(_settings(tmp_path, output="gs://b/run"))


# --- through the CLI: refused in one line before anything is prepared ------------------------


def _run(tmp_path: Path, source: str, monkeypatch) -> tuple[int, str, bool]:
    """`run --source …`; (exit code, stderr, whether the run itself was reached)."""
    from pipelines.targets.local.cli import run as local_run

    reached = []

    def run_local(*_, **__):
        reached.append(True)
        raise SystemExit(0)

    monkeypatch.setattr(local_run, "run_local", run_local)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli.app, ["run", "--source", source, "--output", str(out)])
    assert not (out / "data").exists() and not list(out.glob("**/dataset_metadata*"))
    return result.exit_code, result.stderr, bool(reached)


@pytest.mark.parametrize(
    ("source", "start"),
    [
        ("gs://locked/images", "--source=gs://locked/images: these credentials may not list"),
        ("gs://nobucket/images", "--source=gs://nobucket/images: no such bucket or object"),
    ],
)
def test_run_refuses_an_unreadable_gs_source_before_preparing(
    tmp_path, gcs, monkeypatch, source, start
):
    code, stderr, reached = _run(tmp_path, source, monkeypatch)
    assert (code, reached) == (2, False)
    assert stderr.startswith(f"hpt-pipeline: error: {start}")
    assert stderr.count("\n") == 1


def test_run_without_credentials_is_one_line_before_preparing(
    tmp_path, no_credentials, monkeypatch
):
    code, stderr, reached = _run(tmp_path, "gs://data/images", monkeypatch)
    assert (code, reached) == (2, False)
    assert stderr.startswith("hpt-pipeline: error: --source=gs://data/images: no Google Cloud")
    assert stderr.count("\n") == 1


def test_run_goes_on_with_a_readable_gs_source(tmp_path, gcs, monkeypatch):
    code, stderr, reached = _run(tmp_path, "gs://data/images", monkeypatch)
    assert (code, reached, stderr) == (0, True, "")


# --- the disk estimate counts every kind of source, or says what it cannot ------------------


def test_the_disk_estimate_counts_a_gs_sources_listed_images(tmp_path):
    settings = _settings(tmp_path, source="gs://data/images", image_size=100, record_format="raw")
    trials_only = local_preflight.planned_disk_bytes(settings, 0)
    need = local_preflight.planned_disk_bytes(settings, 3)
    assert need == trials_only + 3 * 100 * 100 * 3
    with pytest.raises(local_preflight.SettingsError, match="the run would write"):
        local_preflight.check_disk(settings, free=need - 1, gcs_images=3)
    assert local_preflight.check_disk(settings, free=need, gcs_images=3) is None


def test_the_disk_estimate_counts_the_sample_and_a_prepared_tfds_dataset(tmp_path):
    from dataprep.sources import digits

    sample = _settings(tmp_path, source="sample")
    assert local_preflight.dataset_images(sample) == len(digits()[1])
    info = tmp_path / "out" / "tensorflow_datasets" / "beans" / "0.1.0" / "dataset_info.json"
    info.parent.mkdir(parents=True)
    splits = [
        {"name": "train", "shardLengths": ["500", "534"]},
        {"name": "test", "shardLengths": ["128"]},
    ]
    info.write_text(json.dumps({"name": "beans", "splits": splits}))
    assert local_preflight.dataset_images(_settings(tmp_path, source="tfds:beans")) == 1162


def test_a_tfds_dataset_still_to_download_is_said_not_counted(tmp_path):
    settings = _settings(tmp_path, source="tfds:beans")
    assert local_preflight.dataset_images(settings) is None
    note = local_preflight.check_disk(settings, free=1 << 50)
    assert note == (
        "disk check: the size of tfds:beans is not known before it is downloaded, so only "
        "the trials' checkpoints and exports and the final model are counted"
    )


def test_prepare_checks_a_gs_source_before_reading_it(tmp_path, gcs):
    out = tmp_path / "data"
    result = CliRunner().invoke(
        cli.app, ["prepare", "--source", "gs://locked/images", "--output", str(out)]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "hpt-pipeline: error: --source=gs://locked/images: these credentials may not list "
        "gs://locked (403: trainer@ does not have storage.objects.list access); grant them "
        "roles/storage.objectViewer on the bucket, or use other credentials\n"
    )
    assert not out.exists()
