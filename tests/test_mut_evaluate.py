"""The evaluation step's report, figure by figure, as `python -m trainer.evaluate` writes it.

A hand-built serving model (PNG bytes in, as Vertex sends them) calls every bright image
dark, so each figure of the report is known exactly: accuracy, log loss, per-class
precision/recall/F1/support, the confusion matrix and the ROC curve. Written for mutmut
(`make mutmut MODULES=trainer/evaluate.py`): the step runs in a process of its own in a
pipeline, where mutmut cannot see which tests reach it.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import use_temp_folder
from tests.synthetic import write_dataset
from trainer import evaluate, records

# TensorFlow imported here, not in the fixture: mutmut's fork server collects (imports) the
# test files once, and each mutant's run forks from it instead of importing TensorFlow again.

DARK, BRIGHT = [0.6, 0.4], [0.55, 0.45]  # both argmax to "dark"; bright ranks above dark


@pytest.fixture(scope="module")
def brightness_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SavedModel whose `serving_default` takes PNG bytes and scores their brightness."""
    with pytest.MonkeyPatch.context() as patch:
        use_temp_folder(tmp_path_factory.mktemp("tf-tmp"), patch)

        class Brightness(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
            def serve(self, image_bytes):
                def one(png):
                    return tf.reduce_mean(tf.cast(tf.io.decode_png(png, channels=3), tf.float32))

                bright = tf.map_fn(one, image_bytes, fn_output_signature=tf.float32) > 100.0
                probabilities = tf.where(bright[:, None], tf.constant([BRIGHT]), [DARK])
                return {"probabilities": probabilities}

        module = Brightness()
        path = str(tmp_path_factory.mktemp("model") / "saved")
        tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


def test_the_evaluation_step_writes_every_figure_of_the_test_split(
    brightness_model, synthetic_data, tmp_path
):
    result = tmp_path / "report.json"
    argv = ["--model_dir", brightness_model, "--data_dir", synthetic_data]
    assert evaluate.main([*argv, "--result", str(result)]) == 0
    report = json.loads(result.read_text(encoding="utf-8"))
    # the synthetic test split: 32 images, dark and bright alternating
    assert report["split"] == "test" and report["count"] == 32
    assert report["class_names"] == ["dark", "bright"]
    assert report["test_accuracy"] == 0.5
    assert report["test_loss"] == pytest.approx(-(math.log(0.6) + math.log(0.45)) / 2)
    assert report["confusion_matrix"] == [[16, 0], [16, 0]]  # rows: the true class
    assert report["per_class"] == {
        "dark": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 16},
        "bright": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 16},
    }
    roc = report["roc"]  # the bright score ranks every bright image first: a perfect curve
    assert roc["auc"] == 1.0
    assert roc["fpr"] == [0.0, 0.0, 1.0] and roc["tpr"] == [0.0, 1.0, 1.0]
    assert roc["thresholds"] == [1.0, pytest.approx(0.45), pytest.approx(0.4)]  # inf → 1.0


def test_a_test_split_with_no_images_is_refused_naming_the_dataset(brightness_model, tmp_path):
    data = write_dataset(str(tmp_path / "data"), counts=(8, 4, 0), shards=(1, 1, 1))
    out = tmp_path / "report.json"
    with pytest.raises(records.DatasetError, match=f"^{data}: the test split is empty$"):
        evaluate.main(["--model_dir", brightness_model, "--data_dir", data, "--result", str(out)])
    assert not out.exists()


@pytest.mark.parametrize("missing", ["--model_dir", "--data_dir", "--result"])
def test_each_flag_of_the_step_is_required(missing, capsys):
    argv = {"--model_dir": "m", "--data_dir": "d", "--result": "r"}
    del argv[missing]
    with pytest.raises(SystemExit) as exit_:
        evaluate.main([x for pair in argv.items() for x in pair])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m trainer.evaluate ")
    assert f"the following arguments are required: {missing}" in err


def test_the_steps_help_says_what_it_does(capsys):
    with pytest.raises(SystemExit):
        evaluate.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m trainer.evaluate ")
    words = " ".join(out.split())
    assert "Score an exported model on a prepared split through its serving signature" in words
    assert "--model_dir MODEL_DIR the exported SavedModel" in words
    assert "--data_dir DATA_DIR the prepared dataset" in words
    assert "--result RESULT local file for the report (JSON)" in words


def _report(labels: list[int], predicted: list[int], k: int = 3) -> dict:
    probabilities = np.eye(k)[predicted] * 0.7 + 0.3 / k
    return evaluate.classification_report(probabilities, np.array(labels), ["a", "b", "c"][:k])


def test_a_class_never_predicted_nor_present_still_has_its_row():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "ill-defined precision" warning in the step's log
        report = _report([0, 0, 1], [0, 1, 1])
    assert report["test_accuracy"] == pytest.approx(2 / 3)
    assert report["confusion_matrix"] == [[1, 1, 0], [0, 1, 0], [0, 0, 0]]
    assert report["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert report["per_class"]["b"]["precision"] == 0.5 and report["per_class"]["b"]["recall"] == 1
    assert report["count"] == 3 and "roc" not in report  # three classes: no ROC curve
    assert report["test_loss"] == pytest.approx(
        -(2 * math.log(0.8) + math.log(0.1)) / 3  # the second "a" was given 0.1
    )


def test_two_classes_with_one_of_them_absent_has_no_roc_curve():
    report = _report([0, 0], [0, 1], k=2)
    assert "roc" not in report
    assert report["test_accuracy"] == 0.5
