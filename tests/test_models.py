"""The model registry: built-in models, pretrained weights from a file, a team's own builder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipelines.models import describe_model
from pipelines.settings import Settings, SettingsError
from pipelines.settings_space import settings_model, study_space
from pipelines.study.search_space import SearchSpaceError
from tests.conftest import ROOT
from trainer.config import ConfigError
from trainer.contract import TRAINER_HYPERPARAMETERS
from trainer.models import MODELS, build_model, model_spec

TEAM_MODULE = '''
"""A team's own model, outside the repository (keras is imported where it is used, so
the checks of the unusable builders below need no TensorFlow import and stay fast)."""
from typing import Literal

Activation = Literal["relu", "tanh"]


def build(image_shape, num_classes, *, width: int = 8, activation: Activation = "relu"):
    """A one-conv network."""
    import keras

    inputs = keras.Input(shape=tuple(image_shape))
    x = keras.layers.Conv2D(width, 3, activation=activation)(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def not_a_model(image_shape, num_classes, *, width: int = 8):
    return "a string"


def untyped(image_shape, num_classes, *, width=8):
    return None


def clashing(image_shape, num_classes, *, learning_rate: float = 0.1):
    return None


def mixed(image_shape, num_classes, *, mode: Literal["a", 1] = "a"):
    return build(image_shape, num_classes)


def wide(image_shape, num_classes, *, width: int = 8):
    """A model that needs 64 px per side."""
    return build(image_shape, num_classes, width=width)


wide.min_image_size = 64
'''


@pytest.fixture(scope="module")
def team_path(tmp_path_factory) -> Path:
    """A folder holding `teammodels/tiny.py`, put on PYTHONPATH for the checking process."""
    folder = tmp_path_factory.mktemp("team")
    (folder / "teammodels").mkdir()
    (folder / "teammodels" / "__init__.py").write_text("")
    (folder / "teammodels" / "tiny.py").write_text(textwrap.dedent(TEAM_MODULE))
    return folder


@pytest.fixture(scope="module")
def on_path(team_path):
    """The team's folder on PYTHONPATH; each reference is checked once for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", f"{team_path}{os.pathsep}{ROOT}")
        mp.syspath_prepend(str(team_path))
        describe_model.cache_clear()
        yield team_path
    describe_model.cache_clear()


@pytest.mark.parametrize("name", list(MODELS))
def test_every_registered_model_maps_images_to_float32_logits(name):
    spec = MODELS[name]
    model = build_model(spec, {}, "none", (32, 32, 3), 3)
    logits = np.asarray(model(np.random.rand(2, 32, 32, 3).astype("float32")))
    assert logits.shape == (2, 3) and logits.dtype == np.float32
    assert model.outputs[0].dtype == "float32"


def backbone_of(model):
    import keras

    return next(layer for layer in model.layers if isinstance(layer, keras.Model))


@pytest.fixture(scope="module")
def resnet():
    return build_model(MODELS["resnet50"], {}, "none", (32, 32, 3), 2)


@pytest.mark.parametrize(
    "blocks, training",
    [(0, set()), (2, {"conv4", "conv5"}), (5, {"stem", "conv2", "conv3", "conv4", "conv5"})],
)
def test_trainable_blocks_train_the_top_of_the_backbone_only(resnet, blocks, training):
    from trainer.models import backbones

    block_of = MODELS["resnet50"].backbone.block_of
    backbones.set_trainable_blocks(backbone_of(resnet), blocks, block_of)
    trained = {block_of(w.path.split("/")[0]) for w in backbone_of(resnet).trainable_weights}
    assert trained == training
    head = {w.path.split("/")[0] for w in resnet.trainable_weights} - {
        w.path.split("/")[0] for w in backbone_of(resnet).weights
    }
    assert {"hidden", "logits"} <= head  # the head always trains


def test_the_builder_applies_trainable_blocks():
    model = build_model(
        MODELS["mobilenet_v3_small"], {"trainable_blocks": 0}, "none", (32, 32, 3), 2
    )
    assert backbone_of(model).trainable_weights == []
    assert len(model.trainable_weights) == 4  # the head's two Dense layers


def test_weights_from_a_file_arrive_in_the_built_model(tmp_path):
    import keras

    backbone = keras.applications.MobileNetV3Small(
        weights=None, include_top=False, input_shape=(32, 32, 3)
    )
    kernel = next(w for w in backbone.weights if w.path.endswith("kernel"))
    changed = np.full(kernel.shape, 0.125, dtype="float32")
    kernel.assign(changed)
    path = tmp_path / "backbone.weights.h5"
    backbone.save_weights(str(path))

    model = build_model(MODELS["mobilenet_v3_small"], {}, str(path), (32, 32, 3), 2)
    loaded = next(w for w in backbone_of(model).weights if w.path.endswith("kernel"))
    np.testing.assert_array_equal(np.asarray(loaded), changed)
    fresh = build_model(MODELS["mobilenet_v3_small"], {}, "none", (32, 32, 3), 2)
    assert not np.array_equal(
        np.asarray(next(w for w in backbone_of(fresh).weights if w.path.endswith("kernel"))),
        changed,
    )


def test_weights_on_an_object_store_are_copied_locally_before_keras_reads_them(tmp_path):
    """gs:// stands in as TensorFlow's `ram://` file system. The file is in the format of
    Keras's own ImageNet downloads (`*_notop.h5`), which h5py opens from local paths only."""
    import h5py
    import keras
    import tensorflow as tf
    from keras.src.legacy.saving import legacy_h5_format  # writes the downloads' format

    backbone = keras.applications.MobileNetV3Small(
        weights=None, include_top=False, input_shape=(32, 32, 3)
    )
    kernel = next(w for w in backbone.weights if w.path.endswith("kernel"))
    kernel.assign(np.full(kernel.shape, 0.25, dtype="float32"))
    local = tmp_path / "mobilenet_v3_small_notop.h5"
    with h5py.File(local, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, backbone)
    remote = f"ram://{tmp_path.name}/mobilenet_v3_small_notop.h5"
    tf.io.gfile.copy(str(local), remote, overwrite=True)

    model = build_model(MODELS["mobilenet_v3_small"], {}, remote, (32, 32, 3), 2)
    loaded = next(w for w in backbone_of(model).weights if w.path.endswith("kernel"))
    np.testing.assert_array_equal(np.asarray(loaded), np.asarray(kernel))


def test_mobilenet_trainable_blocks_13_trains_its_whole_backbone():
    """Only layers with weights are blocks: 13 is the stem, 11 blocks and the last conv."""
    block_of = MODELS["mobilenet_v3_small"].backbone.block_of
    model = build_model(
        MODELS["mobilenet_v3_small"], {"trainable_blocks": 13}, "none", (32, 32, 3), 2
    )
    assert model.name == "hpt_mobilenet_v3_small"  # its `Backbone`'s name
    backbone = backbone_of(model)
    trained = {w.path for w in backbone.trainable_weights}
    blocks = {block_of(path.split("/")[0]) for path in trained}
    assert len(blocks) == 13 and {"conv", "expanded_conv", "conv_1"} <= blocks
    for layer in backbone.layers:
        layer.trainable = True
    assert trained == {w.path for w in backbone.trainable_weights}
    top = build_model(MODELS["mobilenet_v3_small"], {"trainable_blocks": 1}, "none", (32, 32, 3), 2)
    top_blocks = {block_of(w.path.split("/")[0]) for w in backbone_of(top).weights}
    training = {block_of(w.path.split("/")[0]) for w in backbone_of(top).trainable_weights}
    assert training == {"conv_1"}
    assert len(top_blocks) == 13


def test_resnet50_feeds_its_backbone_0_255_images_the_way_imagenet_weights_expect(resnet):
    """Images arrive in [0, 1]; `preprocess_input` (BGR, ImageNet means) wants 0-255."""
    from keras.applications.resnet50 import preprocess_input

    assert resnet.name == "hpt_resnet50"  # its `Backbone`'s name
    images = np.random.RandomState(0).rand(2, 32, 32, 3).astype("float32")
    features = backbone_of(resnet)(preprocess_input(images * 255.0), training=False)
    head = [resnet.get_layer(name) for name in ("pool", "hidden", "logits")]
    expected = features
    for layer in head:
        expected = layer(expected)
    np.testing.assert_allclose(
        np.asarray(resnet(images, training=False)), np.asarray(expected), rtol=1e-4, atol=1e-4
    )


def test_a_pretrained_model_without_weights_set_starts_from_imagenet(tmp_path):
    from pipelines.compiler import compile_pipeline
    from trainer.flags import parse_args

    (tmp_path / "metadata.json").write_text("{}")
    for name in ("resnet50", "mobilenet_v3_small"):
        hparams, _ = parse_args([f"--data={tmp_path}", f"--model={name}"])
        assert hparams.weights == "imagenet", name
    assert parse_args([f"--data={tmp_path}"])[0].weights == "none"  # cnn
    path = compile_pipeline("vertex", Settings(model="resnet50"), tmp_path / "p.yaml")
    root = yaml.safe_load(Path(path).read_text())["root"]["inputDefinitions"]["parameters"]
    assert root["weights"]["defaultValue"] == "imagenet"


def test_a_weights_file_for_a_model_without_a_backbone_is_refused_not_ignored(tmp_path):
    from trainer.flags import parse_args

    weights = tmp_path / "backbone.weights.h5"
    weights.write_bytes(b"")
    (tmp_path / "metadata.json").write_text("{}")
    with pytest.raises(SettingsError) as err:
        Settings(weights=str(weights))
    assert str(err.value) == (
        f"weights={str(weights)!r}: model cnn has no pretrained backbone (expected none)"
    )
    with pytest.raises(ConfigError, match="model cnn has no pretrained backbone"):
        parse_args([f"--data={tmp_path}", "--model=cnn", f"--weights={weights}"])


def test_imagenet_without_network_fails_in_one_line_naming_weights_path(monkeypatch):
    from keras.src.utils import file_utils

    from trainer.models.backbones import WeightsError

    def offline(fname, origin, **kwargs):  # what Keras raises when the download fails
        raise Exception(f"URL fetch failure on {origin}: None -- [Errno -2] Name unknown")

    monkeypatch.setattr(file_utils, "get_file", offline)
    with pytest.raises(WeightsError) as err:
        build_model(MODELS["resnet50"], {}, "imagenet", (32, 32, 3), 2)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("--weights=imagenet: cannot download")
    assert "--weights PATH" in str(err.value)


def test_a_missing_weights_file_is_one_line(tmp_path):
    from trainer.models.backbones import WeightsError

    with pytest.raises(WeightsError, match=r"--weights=.*nope.h5: no such file"):
        build_model(MODELS["resnet50"], {}, str(tmp_path / "nope.h5"), (32, 32, 3), 2)


def test_pretrained_weights_for_a_model_without_a_backbone_are_refused():
    with pytest.raises(SettingsError, match="weights='imagenet': model cnn has no pretrained"):
        Settings(weights="imagenet")
    with pytest.raises(SettingsError, match="image_size=28: expected an integer >= 32"):
        Settings(model="resnet50", image_size=28)
    with pytest.raises(SettingsError, match="model='resnet': expected one of cnn, resnet50"):
        Settings(model="resnet")
    assert Settings(model="resnet50").cloud.model_display_name == "hpt-resnet50"


def test_a_team_model_by_reference_is_inspected_in_a_process_of_its_own(on_path):
    known = describe_model("teammodels.tiny:build", 32)
    assert known.checked
    own = {h.name: h for h in known.spec.hyperparameters}
    assert set(own) == {"width", "activation"}
    assert own["width"].kind is int and own["width"].default == 8
    assert own["activation"].choices == ("relu", "tanh")
    assert "teammodels" not in sys.modules  # this process never imported it


@pytest.mark.parametrize(
    "reference, expected",
    [
        ("teammodels.nosuch:build", "module teammodels.nosuch is not importable here"),
        ("teammodels.tiny:missing", "teammodels.tiny has no function missing"),
        ("teammodels.tiny:not_a_model", "returned str, expected a keras.Model"),
        ("teammodels.tiny:untyped", "keyword-only argument width needs a type annotation"),
        ("teammodels.tiny:clashing", "clashes with the trainer's own --learning_rate"),
        ("teammodels.tiny:mixed", "argument mode: a Literal of strings is expected"),
    ],
)
def test_an_unusable_team_model_is_refused_in_one_line_before_a_run(on_path, reference, expected):
    with pytest.raises(SettingsError) as err:
        settings_model(Settings(model=reference, image_size=32), importable=True)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_team_models_own_min_image_size_refuses_smaller_images(on_path):
    with pytest.raises(SettingsError) as err:
        settings_model(Settings(model="teammodels.tiny:wide", image_size=32), importable=True)
    assert str(err.value) == (
        "image_size=32: model teammodels.tiny:wide needs at least 64 px per side"
    )
    assert settings_model(Settings(model="teammodels.tiny:wide", image_size=64)).checked
    with pytest.raises(SettingsError) as err:  # its builder takes no `weights`
        settings_model(Settings(model="teammodels.tiny:wide", image_size=64, weights="imagenet"))
    assert str(err.value) == (
        "weights='imagenet': model teammodels.tiny:wide has no pretrained backbone (expected none)"
    )


def test_a_team_model_that_is_not_importable_here_still_compiles_with_a_note(on_path):
    known = settings_model(Settings(model="elsewhere.models:build", image_size=32))
    assert not known.checked and "not importable here" in known.note


def write_space(tmp_path, text):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return str(path)


def test_a_team_models_own_hyperparameter_is_searchable_and_checked(on_path, tmp_path):
    good = write_space(
        tmp_path,
        "parameters:\n  - {id: width, type: discrete, values: [4, 8]}\n"
        "  - {id: activation, type: categorical, values: [relu, tanh]}\n"
        "  - {id: learning_rate, type: double, min: 0.001, max: 0.1, scale: log}\n",
    )
    settings = Settings(model="teammodels.tiny:build", search_space=good, image_size=32)
    ids = [p.parameter_id for p in study_space(settings).all_parameters()]
    assert ids == ["width", "activation", "learning_rate"]
    bad = {
        "parameters:\n  - {id: depth, type: integer, min: 1, max: 3}\n": "no flag --depth",
        "parameters:\n  - {id: width, type: double, min: 1, max: 3}\n": "--width takes an integer",
        "parameters:\n  - {id: activation, type: categorical, values: [relu, gelu]}\n": (
            "value gelu is refused by the trainer (--activation takes one of relu, tanh)"
        ),
    }
    for text, expected in bad.items():
        space = write_space(tmp_path, text)
        with pytest.raises(
            SearchSpaceError, match=expected.replace("(", r"\(").replace(")", r"\)")
        ):
            study_space(Settings(model="teammodels.tiny:build", search_space=space, image_size=32))


def test_a_preset_that_does_not_fit_the_model_names_the_presets_that_do(on_path):
    with pytest.raises(SearchSpaceError) as err:
        study_space(Settings(model="teammodels.tiny:build", search_space="default", image_size=32))
    assert "no flag --num_units" in str(err.value)
    assert "presets that fit: optimizer" in str(err.value)
    # With no space set, a model gets its own default preset.
    assert study_space(Settings(model="teammodels.tiny:build", image_size=32)).parameters[
        0
    ].parameter_id == ("learning_rate")
    resnet = study_space(Settings(model="resnet50", image_size=32))
    assert {p.parameter_id for p in resnet.all_parameters()} == {
        "learning_rate",
        "num_units",
        "trainable_blocks",
        "optimizer",
        "momentum",
    }


def test_the_trainer_takes_a_team_models_flags_and_refuses_unknown_ones(on_path, tmp_path):
    from trainer.flags import parse_args

    (tmp_path / "metadata.json").write_text("{}")
    data = f"--data={tmp_path}"
    hparams, _ = parse_args([data, "--model=teammodels.tiny:build", "--width=16.0"])
    assert hparams.model_params == {"width": 16, "activation": "relu"}
    assert (
        hparams.hyperparameters()["learning_rate"]
        == TRAINER_HYPERPARAMETERS["learning_rate"].default
    )
    with pytest.raises(ConfigError, match=r"--activation=gelu: expected one of relu, tanh"):
        parse_args([data, "--model", "teammodels.tiny:build", "--activation=gelu"])
    with pytest.raises(SystemExit):  # argparse: an unknown flag for this model
        parse_args([data, "--model=cnn", "--width=16"])


def test_compiled_specs_carry_the_model_reference_to_every_target(on_path, tmp_path):
    from pipelines.compiler import compile_pipeline

    flat = tmp_path / "flat.yaml"  # Katib refuses the optimizer preset's conditional momentum
    flat.write_text("parameters:\n  - {id: learning_rate, type: double, min: 0.001, max: 0.1}\n")
    settings = Settings(
        model="teammodels.tiny:build",
        image_size=32,
        search_space=str(flat),
        kubeflow_namespace="team-a",  # compile refuses `kubeflow`
    )
    for target in ("vertex", "kubeflow"):
        path = compile_pipeline(target, settings, tmp_path / f"{target}.yaml")
        text = Path(path).read_text()
        assert "teammodels.tiny:build" in text
    assert model_spec("cnn").name == "cnn"


def test_the_checking_process_prints_a_spec_the_pipeline_reads_back(on_path):
    done = subprocess.run(
        [sys.executable, "-m", "trainer.models.custom", "teammodels.tiny:build"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    spec = json.loads(done.stdout.splitlines()[-1])
    assert [h["name"] for h in spec["hyperparameters"]] == ["width", "activation"]
