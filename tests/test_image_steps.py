"""The compiled steps and a Vertex trial, run from the built images (`make images-check`).

Needs buildah and the images built by `make images-build` (minutes; see images/README.md),
so `make test` deselects it (pyproject's `-m "not images"`); `make images-check` selects it
with `-m images` after building them. Run that way without the images, it fails.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tests import image_steps

pytestmark = pytest.mark.images


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    argv = shlex.split(os.environ.get("HPT_IMAGES_CHECK_ARGS", ""))
    work = os.environ.get("HPT_IMAGES_WORK") or str(tmp_path_factory.mktemp("images"))
    image_steps.main([*argv, "--work", work])
    return json.loads((Path(work) / "report.json").read_text())


def test_every_lightweight_step_of_every_target_runs_or_reaches_its_api(report):
    rows = report["steps"]
    assert {r["target"] for r in rows} == set(image_steps.TARGETS)
    ok = ("ran to completion", "reached the API call")
    bad = [r for r in rows if not r["outcome"].startswith(ok)]
    assert not bad, bad
    offline = {"prepare-dataset", "trial-job-spec", "select-best-trial", "final-job-spec",
               "evaluate-model", "tune-locally", "train-locally", "register-locally"}  # fmt: skip
    for r in rows:
        if r["step"] in offline:
            assert r["outcome"] == "ran to completion", r


def test_the_trainer_image_runs_as_a_vertex_trial(report):
    trial = report["trial"]
    assert trial["rc"] == 0, trial["log"]
    assert trial["user"] == "root"
    assert '"val_accuracy"' in trial["metric_file"]
    assert "saved_model.pb" in trial["exported"]
