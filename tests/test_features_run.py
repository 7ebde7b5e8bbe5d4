"""The features step end to end: a frozen-backbone study computes, reuses, recomputes its cache.

Three runs of `mobilenet_v3_small` with a weights file into one output, on a small RGB
digit folder at 32 px, a study over `trainable_blocks` 0 and 2: the first computes the
cache and its trials train on it, the second reuses it, the third (the weights file
rewritten in place) recomputes it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pytest

from pipelines.app.run_summary import summarize
from pipelines.jobs import fork_client
from pipelines.lineage.local import local_lineage
from pipelines.settings import LOCAL_RUN_DEFAULTS, load_settings
from pipelines.targets.local.cli import preflight as local_preflight
from pipelines.targets.local.cli.run import LOG_FILE, run_local
from tests.conftest import use_temp_folder

pytestmark = pytest.mark.slow

SPACE = """parameters:
  - id: trainable_blocks
    type: discrete
    values: [0, 2]
"""


def digit_folder(root: Path, classes: int = 2, per_class: int = 48) -> Path:
    """scikit-learn's digits as 32 px RGB PNG files, one folder per class."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for label in range(classes):
        folder = root / f"digit{label}"
        folder.mkdir(parents=True)
        images = digits.images[digits.target == label][:per_class]
        for i, image in enumerate(images):
            pixels = (image * 255 / 16).astype("uint8")
            Image.fromarray(pixels).convert("RGB").resize((32, 32)).save(folder / f"{i}.png")
    return root


def write_weights(path: Path, value: float) -> None:
    """A MobileNetV3Small backbone's weights file (random, one kernel set to `value`)."""
    import keras

    backbone = keras.applications.MobileNetV3Small(
        weights=None, include_top=False, input_shape=(32, 32, 3)
    )
    kernel = next(w for w in backbone.weights if w.path.endswith("kernel"))
    kernel.assign(np.full(kernel.shape, value, dtype="float32"))
    backbone.save_weights(str(path))


def features_of(result: dict) -> dict:
    artifact = result["tasks"]["features-locally"]["artifacts"]["features"]["artifacts"][0]
    return artifact["metadata"]


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    source = digit_folder(root / "digits")
    weights = root / "backbone.weights.h5"
    write_weights(weights, 0.01)
    (root / "space.yaml").write_text(SPACE)
    settings = load_settings(
        defaults=LOCAL_RUN_DEFAULTS,
        overrides={
            "source": str(source),
            "model": "mobilenet_v3_small",
            "weights": str(weights),
            "search_space": str(root / "space.yaml"),
            "output": str(root / "run"),
            "registry": str(root / "registry"),
            "max_trials": 2,
            "parallel_trials": 2,
            "epochs": 1,
            "workers": 0,
            "trial_accelerator_count": 1,
            "tracking": "off",  # what is tested here is the cache; MLflow's writer costs ~4 s a run
        },
        environ={},
    )
    with pytest.MonkeyPatch.context() as mp, shared_run_server(mp, root, settings.local.output):
        first = run_local(settings, echo=lambda line: None)
        log_after_first = (root / "run" / LOG_FILE).read_text()
        second = run_local(settings, echo=lambda line: None)
        write_weights(weights, 0.02)  # the same path, another content
        third = run_local(settings, echo=lambda line: None)
    return root, first, second, third, log_after_first


@contextlib.contextmanager
def shared_run_server(mp: pytest.MonkeyPatch, root: Path, output: str):
    """One fork server for the three runs, as `hpt-pipeline run` starts one for its steps.

    Each run would start (and wait for) its own, importing TensorFlow again; under
    `HPT_FORK_SERVER` a run uses its ancestor's. Its environment is the one a run gives
    its own (`local_run._owned_run`), so it serves the same requests.
    """
    mp.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    mp.setenv(local_preflight.TFDS_DATA_ENV, local_preflight.tfds_data_dir(output))
    (root / "server-tmp").mkdir()
    use_temp_folder(root / "server-tmp", mp)  # the server's own, not the session's
    with fork_client.shared_for_children(log_path=str(root / fork_client.LOG_FILE)):
        yield


def test_the_first_run_computes_the_cache_for_both_frozen_depths(three_runs):
    root, first, *_, log = three_runs
    meta = features_of(first)
    assert meta["result"] == "computed" and meta["trainable_blocks"] == "0,2"
    assert meta["features_dir"] == str(root / "run" / "features")
    entries = [p for p in (root / "run" / "features").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 2
    assert "features step: computed trainable_blocks 0,2 in" in log


def test_the_trials_train_on_the_cache(three_runs):
    root, *_ = three_runs
    lines = [
        line
        for path in (root / "run" / "study").rglob("*.log")
        for line in path.read_text(errors="replace").splitlines()
        if "features: training on" in line
    ]
    assert {("trainable_blocks=0" in line, "trainable_blocks=2" in line) for line in lines} >= {
        (True, False),
        (False, True),
    }


def test_a_rerun_reuses_the_cache_and_says_how_long_it_took(three_runs):
    root, _, second, *_ = three_runs
    meta = features_of(second)
    assert meta["result"] == "reused"
    assert meta["seconds"] >= 0
    assert "features step: reused trainable_blocks 0,2 in" in (root / "run" / LOG_FILE).read_text()


def test_a_changed_weights_file_recomputes_it(three_runs):
    *_, third, _ = three_runs
    assert features_of(third)["result"] == "computed"


def test_the_summary_and_the_lineage_show_the_features_step(three_runs):
    root, first, *_ = three_runs
    assert summarize(first)["features"].startswith("computed trainable_blocks 0,2 in ")
    graph = local_lineage(root / "run")  # dataset → features → trial job spec → trials
    features = "artifact:features-locally/features"
    assert graph.nodes[features].details["trainable_blocks"] == "0,2"
    assert graph.parents(features) == ["task:features-locally"]
    assert {"task:trial-job-spec", "task:final-job-spec"} <= set(graph.children(features))
    assert "task:features-job-spec" in graph.parents("task:features-locally")
    assert "artifact:prepare-dataset/dataset" in graph.parents("task:features-job-spec")


def test_the_runs_steps_and_trials_were_forked_from_the_one_server(three_runs):
    """The shared server served every run: nothing started afresh (the fixture's premise)."""
    from pipelines.jobs.replica_process import FORKED_NOTE, FRESH_NOTE

    root, *_ = three_runs
    assert (root / fork_client.LOG_FILE).is_file()  # the one server's log …
    assert not (root / "run" / fork_client.LOG_FILE).exists()  # … and no run's own
    run_log = (root / "run" / LOG_FILE).read_text()
    assert run_log.count("$ python -m dataprep.prepare (forked)") == 3
    assert "started afresh" not in run_log and FRESH_NOTE not in run_log
    logs = [p.read_text() for p in (root / "run").rglob("local/*.log")]
    assert logs and all(log.splitlines()[1].startswith(FORKED_NOTE) for log in logs)


def test_the_cached_trials_save_what_trained_and_the_final_model_is_whole(three_runs):
    root, first, *_ = three_runs
    trials = sorted((root / "run" / "study").glob("*/model"))
    assert len(trials) == 2
    for folder in trials:  # docs/features-step.md: nothing reads a trial's folder
        assert sorted(p.name for p in folder.iterdir()) == ["model.json", "trained_part.npz"]
    final = Path(summarize(first)["model"])
    assert (final / "saved_model.pb").is_file()  # the final job exports the whole model
