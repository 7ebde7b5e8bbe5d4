"""What the built-in models' builders give a user: the CNN, ResNet50, MobileNetV3Small, and
what the two transfer models share (`trainer.models.backbones`): weights, the blocks that
train, the preprocessing, the head, the cut the feature cache makes.

Fast: each test builds one model at most, at 32 px (the smallest side either backbone
takes), with no ImageNet download. Written for `make mutmut MODULES=trainer/models/<file>`:
`transfer_builder` runs when `resnet50`/`mobilenet` are imported, before mutmut forks each
mutant's run, so the tests that read a builder's defaults build it afresh (`fresh_module`).
A backbone's blocks are its spec's (`BackboneSpec.block_of`, called at test time).
"""

from __future__ import annotations

import random
import runpy

import keras  # imported once by mutmut's fork server, not by each mutant's run
import numpy as np
import pytest

from trainer import frozen
from trainer.models import MODELS, backbones, build_model, cnn, mobilenet, resnet50

RESNET_BLOCK_OF = MODELS["resnet50"].backbone.block_of
MOBILENET_BLOCK_OF = MODELS["mobilenet_v3_small"].backbone.block_of

SIZE = (32, 32, 3)
IMAGES = np.random.RandomState(0).rand(4, *SIZE).astype("float32")
MOBILENET_BLOCKS = ["conv", "expanded_conv"] + [f"expanded_conv_{i}" for i in range(1, 11)]
MOBILENET_BLOCKS += ["conv_1"]
RESNET_BLOCKS = ["stem", "conv2", "conv3", "conv4", "conv5"]


def fresh_module(module) -> dict:
    """`module`'s namespace built again (its `build` by today's `transfer_builder`)."""
    return runpy.run_path(module.__file__, run_name=module.__name__)


def backbone_of(model: keras.Model) -> keras.Model:
    return next(layer for layer in model.layers if isinstance(layer, keras.Model))


def blocks_in_order(backbone: keras.Model, block_of) -> list[str]:
    """The blocks of `backbone`'s layers that hold weights, bottom to top."""
    return list(dict.fromkeys(block_of(layer.name) for layer in backbone.layers if layer.weights))


def trained_blocks(backbone: keras.Model, block_of) -> set[str]:
    return {block_of(w.path.split("/")[0]) for w in backbone.trainable_weights}


@pytest.fixture
def offline(monkeypatch):
    """Keras's download fails as it does with no network; the error has two lines."""
    from keras.src.utils import file_utils

    def fail(fname, origin, **kwargs):
        raise Exception(f"URL fetch failure on {origin}:\n  None -- [Errno -2] Name unknown")

    monkeypatch.setattr(file_utils, "get_file", fail)


# --- the CNN ---


def test_the_cnn_is_three_conv_pool_relu_blocks_a_hidden_layer_and_logits():
    model = build_model(MODELS["cnn"], {}, "none", SIZE, 3)
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds == ["InputLayer"] + ["Conv2D", "MaxPooling2D", "ReLU"] * 3 + [
        "Flatten",
        "Dense",
        "Dense",
    ]
    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [c.filters for c in convs] == [16, 32, 64]
    assert all(tuple(c.kernel_size) == (3, 3) for c in convs)
    pools = [layer for layer in model.layers if isinstance(layer, keras.layers.MaxPooling2D)]
    assert all(tuple(p.pool_size) == (2, 2) for p in pools)
    # 32 → conv 30 → pool 15 → 13 → 6 → 4 → 2: 2 * 2 * 64 features, then Dense(128) → 3
    assert model.get_layer(index=-3).output.shape == (None, 256)
    hidden, logits = model.layers[-2:]
    assert (hidden.units, logits.units, logits.name) == (128, 3, "logits")
    assert model.count_params() == 448 + 4640 + 18496 + 32896 + 387
    assert model.name == "hpt_cnn" and model.inputs[0].dtype == "float32"
    out = keras.Model(model.inputs, hidden.output)(IMAGES)
    assert np.min(out) >= 0 and np.max(out) > 0  # ReLU
    assert np.asarray(model(IMAGES)).shape == (4, 3)


def test_the_cnn_takes_num_units_and_the_dtype_images_arrive_in():
    model = build_model(MODELS["cnn"], {"num_units": 7}, "none", SIZE, 2, "bfloat16")
    assert model.layers[-2].units == 7
    assert model.inputs[0].dtype == "bfloat16"
    assert cnn.build(SIZE, 2).inputs[0].dtype == "float32"  # its own default


def test_logits_stay_float32_under_mixed_precision():
    """For every built-in model: a stable softmax cross-entropy over bfloat16 layers."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = cnn.build(SIZE, 2, input_dtype="bfloat16")
        head = backbones.head_model(8, 2, num_units=4, input_dtype="bfloat16")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for built in (model, head):
        assert built.get_layer("logits").compute_dtype == "float32"
        assert built.outputs[0].dtype == "float32"
        assert built.layers[-2].compute_dtype == "bfloat16"
        assert built.inputs[0].dtype == "bfloat16"  # what the step feeds it, uncast


# --- which blocks train ---


@pytest.fixture(scope="module")
def mobilenet_model():
    return build_model(MODELS["mobilenet_v3_small"], {}, "none", SIZE, 2)


@pytest.mark.parametrize("blocks", [0, 1, 4, 12, 13])
def test_mobilenet_trains_its_top_trainable_blocks_blocks(mobilenet_model, blocks):
    """13 blocks hold weights (layers without weights are no block); the top ones train."""
    block_of = MOBILENET_BLOCK_OF
    backbone = backbone_of(mobilenet_model)
    assert blocks_in_order(backbone, block_of) == MOBILENET_BLOCKS
    training = backbones.set_trainable_blocks(backbone, blocks, block_of)
    expected = MOBILENET_BLOCKS[len(MOBILENET_BLOCKS) - blocks :] if blocks else []
    assert training == expected
    assert trained_blocks(backbone, block_of) == set(expected)
    assert {"hidden", "logits"} <= {w.path.split("/")[0] for w in mobilenet_model.trainable_weights}


def test_a_frozen_block_runs_its_batch_norm_in_inference_mode(mobilenet_model):
    """The stem (the bottom block) frozen: its BatchNorm keeps ImageNet's statistics."""
    backbone = backbone_of(mobilenet_model)
    stem = keras.Model(backbone.inputs, backbone.get_layer("conv_bn").output)
    images = IMAGES * 255.0
    backbones.set_trainable_blocks(backbone, 12, MOBILENET_BLOCK_OF)
    np.testing.assert_allclose(
        np.asarray(stem(images, training=True)), np.asarray(stem(images, training=False))
    )
    backbones.set_trainable_blocks(backbone, 13, MOBILENET_BLOCK_OF)
    assert not np.allclose(
        np.asarray(stem(images, training=True)), np.asarray(stem(images, training=False))
    )


def test_a_layer_is_in_the_block_its_name_starts_with_and_resnets_stem_is_conv1_and_pool1():
    block_of = RESNET_BLOCK_OF
    assert block_of("conv1_conv") == block_of("pool1_pad") == "stem"
    assert block_of("conv3_block2_out") == "conv3"
    assert block_of("input_layer") == "input_layer"  # no block: its own name
    of = MOBILENET_BLOCK_OF
    assert of("expanded_conv_10_project") == "expanded_conv_10"
    assert of("expanded_conv_depthwise") == "expanded_conv"
    assert of("conv_1_bn") == "conv_1" and of("conv_bn") == "conv" and of("re_lu") == "re_lu"


# --- ResNet50: defaults, preprocessing, blocks ---


def test_resnet50_by_default_trains_all_five_blocks_and_feeds_its_backbone_0_255():
    """Images arrive in [0, 1]; `preprocess_input` (BGR, ImageNet's means) takes 0-255."""
    from keras.applications.resnet50 import preprocess_input

    block_of = RESNET_BLOCK_OF
    model = fresh_module(resnet50)["build"](SIZE, 2, weights=None)
    backbone = backbone_of(model)
    assert model.name == "hpt_resnet50" and model.inputs[0].dtype == "float32"
    assert blocks_in_order(backbone, block_of) == RESNET_BLOCKS
    assert trained_blocks(backbone, block_of) == set(RESNET_BLOCKS)
    assert model.get_layer("hidden").units == 1016
    features = backbone(preprocess_input(IMAGES * 255.0), training=False)
    expected = features
    for name in ("pool", "hidden", "logits"):
        expected = model.get_layer(name)(expected)
    np.testing.assert_allclose(
        np.asarray(model(IMAGES, training=False)), np.asarray(expected), rtol=1e-4, atol=1e-4
    )


def test_resnet50_takes_its_hyperparameters_and_input_dtype():
    model = resnet50.build(
        SIZE, 3, num_units=6, trainable_blocks=2, weights="none", input_dtype="bfloat16"
    )
    assert model.inputs[0].dtype == "bfloat16"
    assert model.get_layer("hidden").units == 6 and model.outputs[0].shape == (None, 3)
    assert trained_blocks(backbone_of(model), RESNET_BLOCK_OF) == {"conv4", "conv5"}


# --- MobileNetV3Small: defaults ---


def test_mobilenet_by_default_trains_all_13_blocks_of_a_backbone_that_scales_0_255():
    model = fresh_module(mobilenet)["build"](SIZE, 2, weights=None)
    backbone = backbone_of(model)
    assert model.name == "hpt_mobilenet_v3_small" and model.inputs[0].dtype == "float32"
    assert trained_blocks(backbone, MOBILENET_BLOCK_OF) == set(MOBILENET_BLOCKS)
    assert model.get_layer("hidden").units == 256
    # MobileNetV3 rescales 0-255 to [-1, 1] itself: the model feeds it images * 255.
    rescaling = next(x for x in backbone.layers if isinstance(x, keras.layers.Rescaling))
    scale = keras.Model(backbone.inputs, rescaling.output)
    np.testing.assert_allclose(np.asarray(scale(IMAGES * 255.0)), IMAGES * 2.0 - 1.0, atol=1e-5)
    pooled = np.asarray(keras.Model(model.inputs, model.get_layer("pool").output)(IMAGES))
    pool = model.get_layer("pool")
    np.testing.assert_allclose(pooled, np.asarray(pool(backbone(IMAGES * 255.0))), rtol=1e-5)
    assert not np.allclose(pooled, np.asarray(pool(backbone(IMAGES))), rtol=1e-2, atol=0)


def test_mobilenet_takes_its_hyperparameters_and_input_dtype():
    model = mobilenet.build(
        SIZE, 3, num_units=5, trainable_blocks=1, weights="none", input_dtype="bfloat16"
    )
    assert model.inputs[0].dtype == "bfloat16"
    assert model.get_layer("hidden").units == 5 and model.outputs[0].shape == (None, 3)
    assert trained_blocks(backbone_of(model), MOBILENET_BLOCK_OF) == {"conv_1"}


# --- weights ---


@pytest.mark.parametrize("module", [resnet50, mobilenet], ids=["resnet50", "mobilenet"])
def test_a_transfer_model_without_weights_set_asks_for_imagenets_one_line(offline, module):
    with pytest.raises(backbones.WeightsError) as err:
        module.build(SIZE, 2)
    message = str(err.value)
    assert message.startswith("--weights=imagenet: cannot download the ImageNet weights (URL")
    assert "\n" not in message and ":  None" not in message and ": None --" in message
    assert message.endswith("); pass --weights PATH to a Keras weights file (local or gs://)")


def test_weights_none_as_a_word_builds_without_downloading(offline):
    model = mobilenet.build(SIZE, 2, weights="none")
    assert np.asarray(model(IMAGES)).shape == (4, 2)


def test_a_missing_weights_file_is_refused_in_one_line_before_a_build(tmp_path, monkeypatch):
    missing = str(tmp_path / "nope.weights.h5")

    def no_build(*args, **kwargs):
        raise AssertionError("built")

    monkeypatch.setattr(keras.applications, "MobileNetV3Small", no_build)
    with pytest.raises(backbones.WeightsError) as err:
        backbones.load_backbone(keras.applications.MobileNetV3Small, missing)
    assert str(err.value) == f"--weights={missing}: no such file (expected a Keras weights file)"


def test_a_weights_file_that_does_not_fit_the_backbone_is_refused_naming_it(tmp_path):
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    path = str(tmp_path / "other.weights.h5")
    other.save_weights(path)
    with pytest.raises(backbones.WeightsError) as err:
        mobilenet.build(SIZE, 2, weights=path)
    message = str(err.value)
    assert message.startswith(f"--weights={path}: cannot load it into the backbone (")
    assert "\n" not in message and message.endswith(")")
    assert len(message) <= len(f"--weights={path}: cannot load it into the backbone ()") + 200


def test_a_long_reason_is_cut_to_200_characters_in_one_line(tmp_path):
    path = tmp_path / "w.weights.h5"
    path.write_bytes(b"")
    reason = "abcdef\n" * 100

    def refusing(**kwargs):
        raise ValueError(reason)

    with pytest.raises(backbones.WeightsError) as err:
        backbones.load_backbone(refusing, str(path))
    assert str(err.value) == (
        f"--weights={path}: cannot load it into the backbone ({'abcdef ' * 28}abcd)"
    )


def test_a_backbone_that_refuses_the_image_size_is_not_blamed_on_weights():
    """With no weights, the backbone's own error is the user's (ResNet50 takes >= 32 px)."""
    with pytest.raises(ValueError, match="Input size must be at least 32x32") as err:
        resnet50.build((16, 16, 3), 2, weights=None)
    assert not isinstance(err.value, backbones.WeightsError)


def test_what_keras_is_asked_to_build(monkeypatch):
    """The backbone without its classifier, at the images' size, with its own arguments."""
    asked = {}

    def factory(**kwargs):
        asked.update(kwargs)
        raise RuntimeError("enough")

    backbone = backbones.Backbone(factory, lambda x: x, str, "t", {"alpha": 0.5})
    with pytest.raises(RuntimeError, match="enough"):
        backbones.transfer_model(
            backbone,
            [32.0, 33, 3],
            2,
            num_units=4,
            trainable_blocks=1,
            weights=None,
            input_dtype="float32",
        )
    assert asked == {
        "weights": None,
        "include_top": False,
        "input_shape": (32, 33, 3),
        "alpha": 0.5,
    }


def test_weights_on_an_object_store_are_copied_to_a_local_file_of_the_same_name(tmp_path):
    """Keras tells a weights file's format by its name, and h5py reads local files only."""
    import tensorflow as tf

    remote = f"ram://{tmp_path.name}/mobilenet_v3_small_notop.h5"
    tf.io.gfile.copy(__file__, remote, overwrite=True)
    local = backbones.local_weights(remote)
    assert "://" not in local and local.endswith("/mobilenet_v3_small_notop.h5")
    with open(local, "rb") as copied, open(__file__, "rb") as original:
        assert copied.read() == original.read()
    here = str(tmp_path / "x.weights.h5")
    open(here, "wb").close()
    assert backbones.local_weights(here) == here  # a local file is read where it is
    assert backbones.local_weights("none") is None and backbones.local_weights(None) is None
    assert backbones.local_weights("imagenet") == "imagenet"


# --- the head, and where the feature cache cuts ---


def test_the_head_starts_alike_built_alone_or_on_its_backbone_for_the_same_seed():
    """A cached trial trains `head_model`; the same trial uncached, the whole model."""
    random.seed(11)
    head = backbones.head_model(576, 3, num_units=8, input_dtype="float32")
    random.seed(11)
    model = mobilenet.build(SIZE, 3, num_units=8, weights=None)
    for name in ("hidden", "logits"):
        for a, b in zip(
            head.get_layer(name).get_weights(), model.get_layer(name).get_weights(), strict=True
        ):
            np.testing.assert_array_equal(a, b)
    random.seed(12)
    other = backbones.head_model(576, 3, num_units=8, input_dtype="float32")
    assert not np.array_equal(other.get_layer("hidden").get_weights()[0], head.get_weights()[0])
    assert head.inputs[0].shape == (None, 576) and head.outputs[0].shape == (None, 3)
    hidden = keras.Model(head.inputs, head.get_layer("hidden").output)
    out = np.asarray(hidden(np.random.RandomState(1).randn(16, 576).astype("float32")))
    assert out.shape == (16, 8) and out.min() == 0 and out.max() > 0  # ReLU


def test_the_feature_cache_cut_gives_the_models_own_logits(mobilenet_model):
    """The frozen prefix → its features → the part that trains: the model's own output."""
    spec = MODELS["mobilenet_v3_small"]
    expected = np.asarray(mobilenet_model(IMAGES, training=False))
    for depth in (spec.blocks, 4):
        prefix = frozen.prefix_model(mobilenet_model, spec, [depth])
        part = frozen.trainable_part(mobilenet_model, spec, depth, "float32")
        got = part(prefix(IMAGES, training=False), training=False)
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-4)
    assert prefix.outputs[0].shape[1:] == part.inputs[0].shape[1:]
