"""A team's model by reference, as `python -m trainer.models.custom REF` checks it, in-process.

The pipeline runs that check in a process of its own (`describe_model`), where mutmut
cannot see which tests reach it: here `custom.main` runs in the test's process, and each
case is what the pipeline reads back from it: the spec as JSON (exit 0) or one line on
stderr (exit 2; 3 when the module is not importable here). Also the catalogue's refusals
and what `build_model` hands a builder. Written for `make mutmut MODULES=trainer/models/`.
"""

from __future__ import annotations

import json
from pathlib import Path

import keras  # noqa: F401  (imported once by mutmut's fork server, not by each mutant's run)
import pytest

from trainer.contract import ContractError
from trainer.models import MODELS, ModelSpec, build_model, check_weights, custom, model_spec

TEAM = '''
"""Team models for the checks."""
from typing import Literal


def _net(image_shape, classes):
    import keras

    inputs = keras.Input(image_shape)
    return keras.Model(inputs, keras.layers.Dense(classes)(keras.layers.Flatten()(inputs)))


def build(image_shape, num_classes, *, width: int = 8, mode: Literal["a", "b"] = "b",
          rate: float = 0.5, name: str = "x", weights=None, input_dtype="float32"):
    """A tiny team model.

    More words.
    """
    return _net(image_shape, num_classes)


build.min_image_size = 16


def undocumented(image_shape, num_classes):
    return _net(image_shape, num_classes)


def kwargs_of(image_shape, num_classes, **kwargs):
    return {"image_shape": image_shape, "num_classes": num_classes, **kwargs}


def three(image_shape, num_classes, extra):
    return None


def one(image_shape, *, width: int = 8):
    return None


def optional_third(image_shape, num_classes, extra=1):
    return _net(image_shape, num_classes)


def run_flag(image_shape, num_classes, *, data: str = "x"):
    return None


def no_default(image_shape, num_classes, *, width: int):
    return None


def listed(image_shape, num_classes, *, sizes: list = None):
    return None


def maybe(image_shape, num_classes, *, width: int | None = None):
    return None


def bad_default(image_shape, num_classes, *, width: int = "wide"):
    return None


def bad_choice(image_shape, num_classes, *, mode: Literal["a", "b"] = "c"):
    return None


def numbers(image_shape, num_classes, *, mode: Literal[1, 2] = 1):
    return None


def wrong_output(image_shape, num_classes):
    return _net(image_shape, num_classes + 1)


def crashes(image_shape, num_classes):
    raise RuntimeError("no\\n  such   layer")


def long_crash(image_shape, num_classes):
    raise RuntimeError("x" * 300)


def text(image_shape, num_classes):
    return "a model"


def subclassed(image_shape, num_classes):
    import keras

    class Net(keras.Model):
        def call(self, x):
            return x

    return Net()


def ghost(image_shape, num_classes, *, width: "Nope" = 1):
    return None


def unreadable(image_shape, num_classes):
    return None


unreadable.__signature__ = "not a signature"


not_callable = 3
'''


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package `mutteam` with the module `models` on the path; its name as a prefix."""
    (tmp_path / "mutteam").mkdir()
    (tmp_path / "mutteam" / "__init__.py").write_text("")
    (tmp_path / "mutteam" / "models.py").write_text(TEAM)
    (tmp_path / "mutteam" / "broken.py").write_text("raise ValueError('bad import')\n")
    (tmp_path / "mutteam" / "needs.py").write_text("import not_installed_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mutteam", "mutteam.models", "mutteam.broken", "mutteam.needs"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    return "mutteam.models:"


def _check(reference: str, capsys, *flags: str) -> tuple[int, str]:
    code = custom.main([reference, *flags])
    out, err = capsys.readouterr()
    return code, (out if code == 0 else err).strip()


def test_a_usable_team_model_prints_its_whole_spec(team, capsys):
    code, out = _check(team + "build", capsys, "--image-size=16")
    assert code == 0
    spec = json.loads(out)
    hyper = {h["name"]: h for h in spec.pop("hyperparameters")}
    assert spec == {
        "name": "mutteam.models:build",
        "builder": "mutteam.models:build",
        "min_image_size": 16,
        "channels": [1, 3],
        "pretrained": True,  # it takes `weights`
        "default_weights": "none",
        "presets": ["optimizer"],
        "typed_input": True,  # it takes `input_dtype`
        "description": "A tiny team model.",
        "backbone": None,  # no cacheable blocks declared
        "own_metrics": False,  # no `hpt_metrics` hook: it reports the trainer's metrics only
    }
    assert list(hyper) == ["width", "mode", "rate", "name"]  # weights, input_dtype: passed
    assert [(h["kind"], h["default"]) for h in hyper.values()] == [
        ("int", 8),
        ("str", "b"),
        ("float", 0.5),
        ("str", "x"),
    ]
    assert hyper["mode"]["choices"] == ["a", "b"] and hyper["width"]["choices"] == []
    assert hyper["width"]["help"] == hyper["mode"]["help"] == "mutteam.models:build"
    back = ModelSpec.from_json(json.loads(out))  # what the pipeline reads back
    assert back == custom.inspect_builder(team + "build") == model_spec(team + "build")
    assert back.all_hyperparameters()["mode"].choices == ("a", "b")
    assert back.all_hyperparameters()["learning_rate"].kind is float  # the trainer's own too


def test_a_builder_without_a_docstring_or_extras_is_described_by_its_reference(team, capsys):
    code, out = _check(team + "undocumented", capsys)
    spec = json.loads(out)
    assert code == 0 and spec["description"] == "mutteam.models:undocumented"
    assert (spec["min_image_size"], spec["pretrained"], spec["typed_input"]) == (1, False, False)
    assert spec["hyperparameters"] == []
    assert json.loads(_check(team + "optional_third", capsys)[1])["name"].endswith("third")


@pytest.mark.parametrize(
    ("function", "code", "line"),
    [
        ("missing", 2, "model=mutteam.models:missing: mutteam.models has no function missing"),
        ("not_callable", 2, "mutteam.models has no function not_callable"),
        (
            "three",
            2,
            "expected build(image_shape, num_classes, *, hyperparameters), got 3 required "
            "positional argument(s)",
        ),
        ("one", 2, "got 1 required positional argument(s)"),
        (
            "run_flag",
            2,
            "keyword-only argument data clashes with the trainer's own --data (rename it)",
        ),
        ("no_default", 2, "keyword-only argument width needs a type annotation and a default"),
        (
            "listed",
            2,
            "keyword-only argument sizes: annotation list is not tunable (expected int, "
            "float, str or Literal[...])",
        ),
        (
            "maybe",
            2,
            "keyword-only argument width: annotation int | None is not tunable (expected "
            "int, float, str or Literal[...])",
        ),
        ("bad_default", 2, "keyword-only argument width: default 'wide' is not an integer"),
        ("bad_choice", 2, "keyword-only argument mode: default 'c' is not one of a, b"),
        (
            "numbers",
            2,
            "keyword-only argument mode: a Literal of strings is expected, got "
            "typing.Literal[1, 2]",
        ),
        ("wrong_output", 2, "output shape (None, 4), expected (None, 3) logits"),
        ("text", 2, "returned str, expected a keras.Model"),
        ("subclassed", 2, "output shape (), expected (None, 3) logits"),
        (
            "long_crash",
            2,
            f"building it for images [32, 32, 3] failed (RuntimeError: {'x' * 200})",
        ),
        ("ghost", 2, "cannot read its signature (name 'Nope' is not defined)"),
        (
            "unreadable",
            2,
            "cannot read its signature (unexpected object 'not a signature' in __signature__ "
            "attribute)",
        ),
        (
            "crashes",
            2,
            "building it for images [32, 32, 3] failed (RuntimeError: no such layer)",
        ),
    ],
)
def test_an_unusable_builder_is_one_line_naming_it(team, capsys, function, code, line):
    got, err = _check(team + function, capsys)
    assert got == code
    assert "\n" not in err and err.startswith(f"model=mutteam.models:{function}: ")
    assert err.endswith(line)


@pytest.mark.parametrize(
    ("reference", "code", "line"),
    [
        ("mutteam.nosuch:build", 3, "module mutteam.nosuch is not importable here"),
        ("otherteam.models:build", 3, "module otherteam is not importable here"),
        ("mutteam.broken:build", 2, "importing mutteam.broken failed (ValueError: bad import)"),
        (
            "mutteam.needs:build",
            2,
            "importing mutteam.needs failed (No module named 'not_installed_anywhere')",
        ),
        ("mutteam.models", 2, "model='mutteam.models': expected package.module:function"),
        ("mutteam..x:build", 2, "model='mutteam..x:build': expected package.module:function"),
    ],
)
def test_a_reference_that_does_not_import_is_one_line(team, capsys, reference, code, line):
    got, err = _check(reference, capsys)
    assert (got, "\n" in err) == (code, False)
    assert line in err
    if code == 3:
        assert err.endswith("(add its folder to PYTHONPATH)")


def test_build_model_hands_the_builder_its_weights_dtype_and_integer_shape(team):
    spec = ModelSpec("t", team + "kwargs_of", pretrained=True, typed_input=True)
    built = build_model(spec, {"width": 4}, "none", (32.0, 32, 3), 2.0, input_dtype="bfloat16")
    assert built == {
        "image_shape": (32, 32, 3),
        "num_classes": 2,
        "width": 4,
        "weights": None,  # `none` reaches a builder as None
        "input_dtype": "bfloat16",
    }
    assert type(built["image_shape"][0]) is int and type(built["num_classes"]) is int
    assert build_model(spec, {}, "/w.h5", (8, 8, 1), 3)["weights"] == "/w.h5"
    assert build_model(spec, {}, "imagenet", (8, 8, 1), 3)["input_dtype"] == "float32"
    plain = ModelSpec("p", team + "kwargs_of")
    assert build_model(plain, {}, "none", (8, 8, 1), 3) == {
        "image_shape": (8, 8, 1),
        "num_classes": 3,
    }


def test_weights_are_checked_against_the_model_in_one_line():
    assert check_weights(MODELS["resnet50"], None) == "imagenet"  # its default
    assert check_weights(MODELS["cnn"], None) == "none"
    assert check_weights(MODELS["cnn"], "none") == "none"
    assert check_weights(MODELS["mobilenet_v3_small"], "/w.h5") == "/w.h5"
    with pytest.raises(ContractError) as err:
        check_weights(MODELS["resnet50"], "  ")
    assert str(err.value) == "weights='  ': expected imagenet, none or a file path"
    with pytest.raises(ContractError) as err:
        check_weights(MODELS["cnn"], "/w.h5")
    assert str(err.value) == (
        "weights='/w.h5': model cnn has no pretrained backbone (expected none)"
    )


def test_an_unknown_model_name_is_refused_naming_the_catalogue():
    assert model_spec() is MODELS["cnn"]
    with pytest.raises(ContractError) as err:
        model_spec("resnet")
    assert str(err.value) == (
        "model='resnet': expected one of cnn, resnet50, mobilenet_v3_small or "
        "package.module:function"
    )


def test_the_catalogues_tunable_depths_and_widths():
    """What `--trainable_blocks` and `--num_units` accept for each built-in model.

    The catalogue is built afresh (`runpy`): it is built when its module loads, before
    mutmut's fork, where no mutant of its helpers would show.
    """
    import runpy

    import trainer.models

    fresh = runpy.run_path(trainer.models.__file__, run_name="trainer.models")["MODELS"]
    for name, blocks, units in (("resnet50", 5, 1016), ("mobilenet_v3_small", 13, 256)):
        hyper = fresh[name].all_hyperparameters()
        depth = hyper["trainable_blocks"]
        assert (depth.kind, depth.default, depth.minimum, depth.maximum) == (int, blocks, 0, blocks)
        assert fresh[name].blocks == blocks
        assert depth.accepts(0) and depth.accepts(blocks) and not depth.accepts(blocks + 1)
        assert f": 0 frozen, {blocks} all (" in depth.help
        width = hyper["num_units"]
        assert (width.kind, width.default, width.minimum, width.maximum) == (int, units, 1, None)
        assert width.help == "units of the head's hidden layer"
    assert fresh["cnn"].all_hyperparameters()["num_units"].default == 128


def test_the_check_builds_at_the_image_size_and_channels_asked(team, capsys):
    code, err = _check(team + "crashes", capsys, "--image-size=20", "--channels=1")
    assert code == 2 and "building it for images [20, 20, 1] failed" in err
    with pytest.raises(SystemExit):
        custom.main([])
    assert capsys.readouterr().err.startswith("usage: python -m trainer.models.custom ")
