"""The frozen backbone's feature cache: its keys, the entrypoint, and trials that train on it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.synthetic import write_dataset
from trainer import feature_keys
from trainer.contract import ContractError
from trainer.models import MODELS

MOBILENET = "mobilenet_v3_small"


# ------------------------------------------------------------------ TF-free keys and sizes


def test_cacheable_values_leave_out_the_whole_network_and_models_without_blocks():
    assert MODELS["resnet50"].blocks == 5 and MODELS[MOBILENET].blocks == 13
    assert MODELS["cnn"].blocks == 0
    assert feature_keys.cacheable_values(5, [0, 2.0, 5, 2, 3]) == [0, 2, 3]
    assert feature_keys.cacheable_values(0, [0, 1]) == []  # the CNN, a team's builder
    assert not feature_keys.is_cacheable(13, 13)
    assert feature_keys.frozen_depth(13, 2) == 11


@pytest.mark.parametrize("text", ["0,6", "-1", "1.5", "a", "0,,2"])
def test_trainable_blocks_lists_outside_the_model_are_refused_in_one_line(text):
    with pytest.raises(ContractError, match=rf"^--trainable_blocks={text}: expected .*\[0, 5\]$"):
        feature_keys.parse_values(text, 5)


def test_the_estimate_counts_train_and_validation_at_each_depth():
    counts = {"train": 10, "validation": 4, "test": 1000}  # test is not cached
    pooled = 14 * (2048 * 4 + feature_keys.RECORD_OVERHEAD)
    resnet = MODELS["resnet50"]
    assert feature_keys.estimate_bytes(resnet, [96, 96, 3], counts, [5]) == pooled
    stage3 = 14 * (12 * 12 * 512 * 4 + feature_keys.RECORD_OVERHEAD)  # 96 / 8 = 12
    assert feature_keys.estimate_bytes(resnet, [96, 96, 3], counts, [5, 3]) == pooled + stage3
    assert feature_keys.feature_shape(MODELS[MOBILENET], [33, 40, 3], 1) == (17, 20, 16)


def test_mismatches_name_every_key_that_differs():
    keys = {
        "model": "resnet50",
        "weights": "w.h5",
        "weights_fingerprint": "sha256:a",
        "image_shape": [32, 32, 3],
        "precision": "float32",
        "frozen_depth": 5,
        "dataset_fingerprint": "sha256:d",
    }
    assert feature_keys.mismatches(keys, {**keys, "image_shape": [32.0, 32.0, 3.0]}) == []
    found = {**keys, "weights_fingerprint": "sha256:b", "precision": "mixed_bfloat16"}
    assert feature_keys.mismatches(keys, found) == [
        "weights_fingerprint: 'sha256:b' != 'sha256:a'",
        "precision: 'mixed_bfloat16' != 'float32'",
    ]


# ------------------------------------------------------------------ the cut


@pytest.mark.parametrize("name", ["resnet50", MOBILENET])
def test_the_cut_at_every_depth_is_exact_and_its_shape_is_the_tables(name):
    """Each block's output, cut and size are what the model's `BackboneSpec` declares."""
    from trainer import frozen
    from trainer.models import build_model

    spec = MODELS[name]
    model = build_model(spec, {"trainable_blocks": 1}, "none", (40, 36, 3), 3)
    images = np.random.default_rng(0).random((2, 40, 36, 3)).astype("float32")
    whole = np.asarray(model(images, training=False))
    depths = list(range(1, spec.blocks + 1))
    features = frozen.prefix_model(model, spec, depths)(images, training=False)
    for depth, values in zip(depths, features, strict=True):
        assert tuple(values.shape[1:]) == feature_keys.feature_shape(spec, [40, 36, 3], depth)
        part = frozen.trainable_part(model, spec, depth, "float32")
        np.testing.assert_allclose(np.asarray(part(values, training=False)), whole, atol=1e-5)
    top = frozen.trainable_part(model, spec, spec.blocks, "float32")
    assert {w.path.split("/")[0] for w in top.trainable_weights} == {"hidden", "logits"}
    assert frozen.backbone_of(model).count_params() == spec.backbone.params  # its declared size


# ------------------------------------------------------------------ the entrypoint


@pytest.fixture(scope="module")
def data32(tmp_path_factory) -> str:
    return write_dataset(str(tmp_path_factory.mktemp("data32")))


def features_main(capsys, *args: str) -> tuple[int, str]:
    from trainer import features

    code = features.main(list(args))
    return code, capsys.readouterr().err


def base_args(data: str, out: Path, *more: str) -> list[str]:
    return [
        f"--data={data}",
        f"--output={out}",
        f"--model={MOBILENET}",
        "--precision=float32",
        "--batch_size=40",
        *more,
    ]


def random_weights_file(path: Path, seed: int) -> str:
    import keras

    keras.utils.set_random_seed(seed)
    backbone = keras.applications.MobileNetV3Small(
        weights=None, include_top=False, input_shape=(32, 32, 3)
    )
    backbone.save_weights(str(path))
    return str(path)


def test_entries_are_written_per_cached_depth_mirroring_the_shards_then_reused(
    data32, tmp_path, capsys
):
    out = tmp_path / "features"
    args = base_args(data32, out, "--weights=none", "--trainable_blocks=0,2,13")
    code, err = features_main(capsys, *args)
    assert code == 0, err
    assert "trainable_blocks=13 not cached: the whole network trains" in err
    assert "train batch 4/4 (96/96 images)" in err  # 4 shards of 24, batch 40
    assert sorted(p.name for p in out.iterdir()) == [
        f"{MOBILENET}-frozen11",
        f"{MOBILENET}-frozen13",
    ]
    meta = json.loads((out / f"{MOBILENET}-frozen13" / "metadata.json").read_text())
    dataset = json.loads((Path(data32) / "metadata.json").read_text())
    assert meta["feature_shape"] == [576] and meta["trainable_blocks"] == 0
    assert meta["weights_fingerprint"] == "none:seed=42" and meta["precision"] == "float32"
    for split in ("train", "validation"):
        assert [(s["file"], s["count"]) for s in meta["splits"][split]["shards"]] == [
            (s["file"], s["count"]) for s in dataset["splits"][split]["shards"]
        ]
    assert "test" not in meta["splits"]

    code, err = features_main(capsys, *args)
    assert code == 0 and "features: computing" not in err
    assert f"reused {out / f'{MOBILENET}-frozen11'} for trainable_blocks=2" in err


def test_a_changed_weights_file_or_precision_recomputes(data32, tmp_path, capsys):
    out = tmp_path / "features"
    weights = random_weights_file(tmp_path / "backbone.weights.h5", seed=1)
    args = base_args(data32, out, f"--weights={weights}", "--trainable_blocks=0")
    assert features_main(capsys, *args)[0] == 0
    first = (out / f"{MOBILENET}-frozen13" / "train-00000-of-00004.tfrecord").read_bytes()
    random_weights_file(tmp_path / "backbone.weights.h5", seed=2)  # same path, new content
    code, err = features_main(capsys, *args)
    assert code == 0 and "has other keys (weights_fingerprint: 'sha256:" in err
    again = (out / f"{MOBILENET}-frozen13" / "train-00000-of-00004.tfrecord").read_bytes()
    assert again != first
    bf16 = [a.replace("float32", "mixed_bfloat16") for a in args]
    code, err = features_main(capsys, *bf16)
    assert code == 0 and "precision: 'float32' != 'mixed_bfloat16'" in err


def test_an_interrupted_write_leaves_nothing_that_looks_complete(
    data32, tmp_path, capsys, monkeypatch
):
    from trainer import feature_store

    out = tmp_path / "features"
    real, calls = feature_store.encode, []

    def failing(features, label):
        calls.append(1)
        if len(calls) > 50:
            raise KeyboardInterrupt  # as a Ctrl-C or a stopped step would
        return real(features, label)

    monkeypatch.setattr(feature_store, "encode", failing)
    args = base_args(data32, out, "--weights=none", "--trainable_blocks=0,2")
    with pytest.raises(KeyboardInterrupt):
        features_main(capsys, *args)
    assert not list(out.rglob("metadata.json")) and not [
        p for p in out.iterdir() if not p.name.startswith(".")
    ]
    monkeypatch.setattr(feature_store, "encode", real)
    code, err = features_main(capsys, *args)
    assert code == 0 and "features: computing" in err and len(list(out.rglob("metadata.json"))) == 2


def test_features_over_the_budget_are_refused_in_one_line(data32, tmp_path, capsys):
    out = tmp_path / "features"
    args = base_args(data32, out, "--weights=none", "--trainable_blocks=0", "--max_bytes=1000")
    code, err = features_main(capsys, *args)
    assert code == 2
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and lines[0].startswith("features: error: --max_bytes=1000: the ")
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize(
    "more, code, expected",
    [
        (["--trainable_blocks=14"], 2, "--trainable_blocks=14: expected comma-separated"),
        (["--trainable_blocks=0", "--batch_size=0"], 2, "--batch_size=0: expected"),
        (["--trainable_blocks=0", "--weights=/no/such.h5"], 2, "--weights=/no/such.h5: no such"),
        (["--trainable_blocks=13"], 0, "trainable_blocks=13 not cached"),
    ],
)
def test_bad_or_useless_requests_say_so_in_one_line(data32, tmp_path, capsys, more, code, expected):
    out = tmp_path / "features"
    got, err = features_main(capsys, *base_args(data32, out, *more))
    assert got == code and expected in err
    assert not out.exists()


def test_a_model_without_blocks_has_nothing_to_cache(data32, tmp_path, capsys):
    args = [f"--data={data32}", f"--output={tmp_path}", "--model=cnn", "--trainable_blocks=0"]
    code, err = features_main(capsys, *args)
    assert code == 0 and "nothing to cache: model cnn declares no frozen backbone blocks" in err


def test_each_model_of_a_model_choice_is_cached_in_one_job(data32, tmp_path, capsys):
    """Issue 51, case 19: `--model`/`--trainable_blocks` pairs, as the features step of a study
    that chooses the model passes them (a model without blocks is said and skipped)."""
    out = tmp_path / "features"
    pairs = [f"--model={MOBILENET}", "--model=cnn", "--trainable_blocks=0,2"]
    args = [f"--data={data32}", f"--output={out}", "--precision=float32", "--weights=none"]
    args += [*pairs, "--trainable_blocks=0"]
    code, err = features_main(capsys, *args)
    assert code == 0, err
    entries = sorted(p.name for p in out.iterdir())
    assert entries == [f"{MOBILENET}-frozen11", f"{MOBILENET}-frozen13"]
    assert "nothing to cache: model cnn declares no frozen backbone blocks" in err

    code, err = features_main(capsys, *args[:-1])  # two models, one list of values
    assert code == 2
    assert err.strip() == (
        "features: error: 2 --model for 1 --trainable_blocks: expected one --trainable_blocks "
        "per --model"
    )
