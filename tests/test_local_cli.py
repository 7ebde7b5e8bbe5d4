"""The local commands' fast paths: bad input refused before any work, progress filtering, models."""

import io
import json

import pytest
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.settings import SettingsError
from pipelines.targets.local.cli import run as run_module
from pipelines.targets.local.cli.run import ProgressFilter, failure_reason

RUNNER = CliRunner()

KFP_LOG = """\
09:00:00.000 - INFO - Executing task \x1b[96m'tune-locally'\x1b[0m
09:00:00.001 - INFO - Streamed logs:
    [KFP Executor 2026-11-21 09:00:00,000 INFO]: Looking for component `tune_locally`
    [KFP Executor 2026-11-21 09:00:00,001 INFO]: Got executor_input:
    {
    "inputs": {
    "parameterValues": {"seed": 42}
    }
    }
    I0000 00:00:1795251211.996637   15002 port.cc:153] oneDNN custom operations are on.
    trial 1 succeeded: val_accuracy=0.84 (step 4) learning_rate=0.013
    [KFP Executor 2026-11-21 09:00:09,000 INFO]: Wrote executor output file to /x.json.
09:00:10.000 - INFO - Task \x1b[96m'tune-locally'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m
09:00:10.001 - INFO - Task \x1b[96m'tune-locally'\x1b[0m outputs:
    trials: Artifact( name='trials', uri='/x', metadata={'trial_count': 4.0} )
--------------------------------------------------------------------------------
"""


def test_progress_filter_keeps_progress_and_logs_everything():
    shown, log = [], io.StringIO()
    stream = ProgressFilter(log, shown.append)
    for chunk in (KFP_LOG[:200], KFP_LOG[200:]):  # lines split across writes
        stream.write(chunk)
    assert shown == [
        "▶ tune-locally",
        "    trial 1 succeeded: val_accuracy=0.84 (step 4) learning_rate=0.013",
        "✓ tune-locally success",
    ]
    assert log.getvalue() == KFP_LOG


# What TensorFlow and absl print in a task (verbatim from local runs and `prepare`), between
# our own lines; the final job's replicas come tagged by the local job executor.
TF_CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795424006.634089    3320 port.cc:153] oneDNN custom operations are on. You may"
    " see slightly different numerical results due to floating-point round-off errors.",
    "I0000 00:00:1795424006.675102    3320 cpu_feature_guard.cc:227] This TensorFlow binary is"
    " optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_BF16 AMX_TILE FMA, in other"
    " operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795424009.508856    3407 jpeg_mem.cc:331] Premature end of JPEG data.",
    "Input file read error",
    "W0000 00:00:1795424009.531743    3320 local_rendezvous.cc:412] Local rendezvous is aborting"
    " with status: OUT_OF_RANGE: End of sequence",
    "2026-11-21 09:00:01.000000: W tensorflow/core/framework/local_rendezvous.cc:404] Local"
    " rendezvous is aborting with status: OUT_OF_RANGE: End of sequence",
    "[chief-0] WARNING: All log messages before absl::InitializeLog() is called are written to"
    " STDERR",
    "[worker-0] I0000 00:00:1795423956.525618    1669 port.cc:153] oneDNN custom operations on.",
    "[worker-0] E0000 00:00:1795423969.911543    1898 base_collective_executor.cc:252]"
    " BaseCollectiveExecutor::StartAbort UNAVAILABLE: Failed to send RPC to coordination service.",
    "[worker-0] Additional GRPC error information from remote target /job:chief/replica:0/task:0"
    " while calling /tensorflow.CoordinationService/Heartbeat:",
    '[worker-0] :UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"failed"}',
]
OUR_LINES = [
    "prepared 179/1797 images",
    "trial 1 succeeded: val_accuracy=0.84 (step 4) learning_rate=0.013",
    "[chief-0] epoch 1/10: train_loss=2.1 train_accuracy=0.3 val_loss=1.9 val_accuracy=0.4 "
    "(0.5s, 3109 img/s)",
    "[chief-0] trainer: exported model to /x/model/",
    # a fatal line is why a process died: it stays on screen
    "[worker-0] F0000 00:00:1795423969.911543    1898 collective_ops.cc:9] Check failed: ok",
    "ValueError: learning_rate must be > 0",
]


def test_progress_filter_keeps_tensorflow_chatter_in_the_log_only():
    """The progress output holds none of TensorFlow's start-up lines; the log keeps them all."""
    assert len(TF_CHATTER) > len(OUR_LINES)
    body = [line for i, noise in enumerate(TF_CHATTER) for line in (noise, *OUR_LINES[i : i + 1])]
    text = (
        "09:00:00.000 - INFO - Executing task \x1b[96m'train-locally'\x1b[0m\n"
        "09:00:00.001 - INFO - Streamed logs:\n"
        + "".join(f"    {line}\n" for line in body)
        + "09:00:10.000 - INFO - Task 'train-locally' finished with status SUCCESS\n"
    )
    shown, log = [], io.StringIO()
    stream = ProgressFilter(log, shown.append)
    for start in range(0, len(text), 97):  # lines split across writes
        stream.write(text[start : start + 97])

    assert shown == [
        "▶ train-locally",
        *(f"    {line}" for line in OUR_LINES),
        "✓ train-locally success",
    ]
    for marker in (
        "absl",
        "oneDNN",
        "cpu_feature_guard",
        "rebuild TensorFlow",
        "rendezvous",
        "Input file read error",
        "I0000",
        "W0000",
        "E0000",
        "GRPC",
        "grpc_status",
    ):
        assert not any(marker in line for line in shown), marker
        assert marker in log.getvalue(), marker
    assert log.getvalue() == text
    assert all(run_module.is_tf_noise(line) for line in TF_CHATTER)
    assert not any(run_module.is_tf_noise(line) for line in OUR_LINES)


def test_failure_reason_is_the_last_exception_line(tmp_path):
    log = tmp_path / "pipeline.log"
    log.write_text(
        "    Traceback (most recent call last):\n"
        "    pipelines.study.selection.SelectionError: best trial 2 has val_accuracy=0.5, "
        "missing it\n"
        "RuntimeError: Task 'select-best-trial' finished with status FAILURE\n"
    )
    assert failure_reason(log) == "SelectionError: best trial 2 has val_accuracy=0.5, missing it"
    assert failure_reason(tmp_path / "missing.log") is None


def _one_line_error(args, expected):
    result = RUNNER.invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpt-pipeline: error: ") and expected in lines[0]


def test_run_refuses_bad_input_before_any_work(tmp_path):
    _one_line_error(
        ["run", "--source", str(tmp_path / "nope"), "--output", str(tmp_path / "o")],
        f"source='{tmp_path / 'nope'}'",
    )
    _one_line_error(["run", "--parallel-trials", "9", "--max-trials", "2"], "parallel_trials=9")
    _one_line_error(["run", "--algorithm", "BAYES"], "algorithm='BAYES'")
    space = tmp_path / "space.yaml"
    space.write_text(
        "parameters:\n- {id: learning_rate, type: double, min: 1, max: 0.1, scale: log}\n"
    )
    _one_line_error(["run", "--search-space", str(space)], "learning_rate")
    out = str(tmp_path / "o")
    _one_line_error(
        ["run", "--algorithm", "GRID_SEARCH", "--output", out],
        "algorithm=GRID_SEARCH: parameter 'learning_rate' is a double",
    )
    assert not (tmp_path / "o").exists()


def test_a_prepared_dataset_given_to_run_is_refused_saying_what_to_pass(tmp_path):
    """Issue 51, case 17: `prepare --output data/` then `run --source data/`."""
    prepared = tmp_path / "data"
    prepared.mkdir()
    (prepared / "metadata.json").write_text("{}")  # `hpt-pipeline prepare`'s mark
    (prepared / "train-00000-of-00001.tfrecord").write_bytes(b"")
    out = tmp_path / "o"
    _one_line_error(
        ["run", "--source", str(prepared), "--output", str(out)],
        f"source='{prepared}': a prepared dataset (`hpt-pipeline prepare`'s output); a run "
        "prepares its source itself (at --image-size): pass the image folder, 'sample' or "
        "tfds:<name> it was prepared from",
    )
    assert not out.exists()


def test_the_old_replicas_spelling_is_refused_in_one_line_naming_workers(tmp_path, monkeypatch):
    """`replicas` counts the chief elsewhere; the setting is `workers`, whatever the spelling."""
    meaning = "(the final job's workers besides the chief)"
    out = tmp_path / "o"
    _one_line_error(
        ["run", "--replicas", "2", "--output", str(out)], f"--replicas: say --workers {meaning}"
    )
    config = tmp_path / "settings.yaml"
    config.write_text("workers: 1\nreplicas: 2\n")
    _one_line_error(
        ["run", "--config", str(config), "--output", str(out)],
        f"--config={config}: replicas: say workers {meaning}",
    )
    monkeypatch.setenv("HPT_REPLICAS", "2")
    _one_line_error(["run", "--output", str(out)], f"HPT_REPLICAS: say HPT_WORKERS {meaning}")
    assert not out.exists()


def test_compile_refuses_an_unknown_target(tmp_path):
    _one_line_error(
        ["compile", "--target", "sagemaker", "--output", str(tmp_path / "p.yaml")],
        "--target=sagemaker",
    )


def test_models_lists_the_registry(tmp_path):
    from pipelines.targets.local import registry

    model = tmp_path / "m"
    model.mkdir()
    registry.register(
        model,
        tmp_path / "reg",
        "hpt-cnn",
        {
            "metrics": {"test_accuracy": 0.875},
            "lineage": {
                "best_trial_id": "3",
                "dataset_source": "/data/shapes",
                "run": "/out/artifacts/hpt-pipeline-2026-01-01",
                "study": "/out/study",
            },
        },
    )
    result = RUNNER.invoke(cli.app, ["models", "--registry", str(tmp_path / "reg")])
    assert result.exit_code == 0
    assert "hpt-cnn" in result.output and "v1" in result.output and "0.8750" in result.output
    empty = RUNNER.invoke(cli.app, ["models", "--registry", str(tmp_path / "none")])
    assert "no models registered" in empty.output
    as_json = RUNNER.invoke(
        cli.app, ["models", "--registry", str(tmp_path / "reg"), "--format", "json"]
    )
    (card,) = json.loads(as_json.stdout)
    assert (
        card["name"] == "hpt-cnn"
        and card["version"] == 1
        and card["metrics"]["test_accuracy"] == 0.875
    )
    as_csv = RUNNER.invoke(
        cli.app, ["models", "--registry", str(tmp_path / "reg"), "--format", "csv"]
    )
    assert as_csv.stdout.splitlines()[0] == (
        "model,version,registered,test_accuracy,best trial,dataset,run,study,path"
    )
    assert as_csv.stdout.splitlines()[1].startswith("hpt-cnn,v1,")
    assert ",3,/data/shapes,hpt-pipeline-2026-01-01,/out/study," in as_csv.stdout
    none = RUNNER.invoke(
        cli.app, ["models", "--registry", str(tmp_path / "none"), "--format", "json"]
    )
    assert json.loads(none.stdout) == []
    _one_line_error(
        ["models", "--format", "yaml"], "--format=yaml: expected one of table, csv, json"
    )


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_compile_refuses_placeholder_images_for_a_cloud_target(tmp_path, monkeypatch, target):
    spec = tmp_path / "p.yaml"
    monkeypatch.delenv("HPT_TRAINER_IMAGE", raising=False)
    monkeypatch.delenv("HPT_COMPONENTS_IMAGE", raising=False)
    _one_line_error(["compile", "--target", target, "--output", str(spec)], "trainer_image=")
    assert not spec.exists()
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    monkeypatch.setenv("HPT_KUBEFLOW_NAMESPACE", "team-a")  # compile refuses `kubeflow`
    result = RUNNER.invoke(cli.app, ["compile", "--target", target, "--output", str(spec)])
    assert result.exit_code == 0, result.output
    assert "registry.example/hpt/trainer:v1" in spec.read_text()
    local = RUNNER.invoke(cli.app, ["compile", "--output", str(tmp_path / "l.yaml")])
    assert local.exit_code == 0, local.output  # the local target runs no image


def test_version_prints_the_installed_packages_version():
    from importlib.metadata import version

    from typer.testing import CliRunner

    from pipelines.app.cli import app

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"hpt-pipeline {version('hpt-pipeline')}"


def test_the_run_summary_keeps_every_path_whole_when_piped():
    """Issue 51, case 20: `hpt-pipeline run | tee run.txt` (not a terminal, 80 columns by
    default) printed the summary's paths folded mid-word."""
    from rich.console import Console

    from pipelines.app import run_summary

    deep = "/home/someone/projects/vision-team/experiments/runs/latest/artifacts/" + "x" * 60
    result = {
        "tasks": {"select-best-trial": {"parameterValues": {"best_metric": 0.9}}},
        "run_dir": deep,
        "log": f"{deep}/pipeline.log",
        "seconds": 12.0,
        "trial_report": f"{deep}/trial-report/index.html",
    }
    out = io.StringIO()
    run_summary.show(Console(file=out), result)
    lines = out.getvalue().splitlines()
    for path in (f"{deep}/pipeline.log", f"{deep}/trial-report/index.html"):
        assert any(path in line for line in lines), path


# --- issue 51: every failure is one line up front ------------------------------------------------


def test_compile_refuses_an_output_kfp_cannot_write_as_yaml(tmp_path):
    """kfp writes only .yaml/.yml (and .json, without the target mark `submit` reads)."""
    for name in ("x.yaml.out", "x.json", "x"):
        _one_line_error(
            ["compile", "--output", str(tmp_path / name)],
            f"--output={tmp_path / name}: expected a file name ending in .yaml or .yml",
        )
    assert list(tmp_path.iterdir()) == []
    blocked = tmp_path / "file"
    blocked.write_text("")
    _one_line_error(
        ["compile", "--output", str(blocked / "p.yaml")], f"--output={blocked / 'p.yaml'}: cannot"
    )


def _immutable(folder):
    """`folder` made unwritable: `chattr +i` as root (mode bits do not stop root), else 0o555."""
    import os
    import subprocess

    folder.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o555)
    return lambda: folder.chmod(0o755)


@pytest.mark.parametrize("setting", ["output", "registry"])
def test_run_refuses_an_output_or_registry_it_cannot_write_before_any_work(tmp_path, setting):
    """Issue 51 (10, 11): an immutable folder, or a file in the way, is one line, at once."""
    locked = tmp_path / "locked"
    undo = _immutable(locked)
    try:
        output = tmp_path / "out"
        args = ["run", "--output", str(output), "--registry", str(tmp_path / "reg")]
        args[args.index(f"--{setting}") + 1] = str(locked / "x")
        _one_line_error(
            args, f"{setting}={locked / 'x'}: cannot write in {locked} (Operation not permitted"
        )
    finally:
        undo()
    assert list(locked.iterdir()) == [] and not output.exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    args = ["run", "--output", str(output), "--registry", str(tmp_path / "reg")]
    args[args.index(f"--{setting}") + 1] = str(afile / "x")
    _one_line_error(args, f"{setting}={afile / 'x'}: {afile} is a file, not a folder")
    assert not output.exists() and not (tmp_path / "reg").exists()


def test_run_refuses_a_negative_seed_when_the_settings_load(tmp_path):
    """Issue 51 (13): not inside the preparation step, after the run has started."""
    output = tmp_path / "out"
    _one_line_error(
        ["run", "--seed", "-1", "--output", str(output)],
        "seed=-1: expected an integer in [0, 4294967295]",
    )
    assert not output.exists()


def test_an_unknown_hpt_variable_is_warned_about_with_the_near_name(tmp_path, monkeypatch):
    """Issue 51 (13): `HPT_EPOCS=2` was ignored without a word."""
    monkeypatch.setenv("HPT_EPOCS", "2")
    monkeypatch.setenv("HPT_NOTHING_LIKE_IT", "1")
    result = RUNNER.invoke(cli.app, ["compile", "--output", str(tmp_path / "p.yaml")])
    assert result.exit_code == 0, result.output
    assert "warning: HPT_EPOCS is not a setting, ignored (did you mean HPT_EPOCHS?)" in (
        result.output
    )
    assert "warning: HPT_NOTHING_LIKE_IT is not a setting, ignored\n" in result.output


def test_an_unknown_yaml_key_names_the_setting_it_is_near(tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text("epocs: 2\n")
    _one_line_error(
        ["compile", "--config", str(config), "--output", str(tmp_path / "p.yaml")],
        f"--config={config}: unknown setting 'epocs' (did you mean 'epochs'?)",
    )


def test_an_objective_the_model_cannot_report_is_refused_up_front(tmp_path):
    """Issue 51 (12): cnn reports no `flops`: every trial would fail on it, then the rerun."""
    _one_line_error(
        ["compile", "--output", str(tmp_path / "p.yaml")]
        + ["--config", str(_config(tmp_path, "objectives: [val_accuracy, flops:min]"))],
        "model cnn does not report flops",
    )
    output = tmp_path / "out"
    _one_line_error(
        ["run", "--objectives", "val_accuracy,flops:min", "--output", str(output)],
        "objectives=flops:min: model cnn does not report flops (it reports val_accuracy, "
        "val_loss, model_size_mb, latency_ms); a team's own metric comes from its builder's "
        "hpt_metrics",
    )
    assert not output.exists()


def _config(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text + "\n")
    return path


def test_a_team_builder_with_hpt_metrics_may_name_its_own_metric(tmp_path, monkeypatch):
    """The refusal above is for models that cannot report the metric, not for a team's hook."""
    from pipelines.models import KnownModel
    from pipelines.settings import Settings
    from pipelines.settings_space import study_space
    from trainer.models import custom

    (tmp_path / "teamflops.py").write_text(
        "def build(image_shape, num_classes, *, width: int = 8):\n"
        "    raise NotImplementedError\n\n\n"
        "def plain(image_shape, num_classes, *, width: int = 8):\n"
        "    raise NotImplementedError\n\n\n"
        "build.hpt_metrics = lambda model: {'flops': 1.0}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    objectives = ("val_accuracy", "flops:min")
    hooked = custom.inspect_builder("teamflops:build")
    assert hooked.own_metrics
    settings = Settings(model="teamflops:build", objectives=objectives)
    assert [m.metric_id for m in study_space(settings, KnownModel(hooked)).metrics] == [
        "val_accuracy",
        "flops",
    ]
    plain = custom.inspect_builder("teamflops:plain")
    assert not plain.own_metrics
    with pytest.raises(SettingsError, match="model teamflops:plain does not report flops"):
        study_space(settings.replace(model="teamflops:plain"), KnownModel(plain))


def test_the_default_registry_is_in_the_output_not_the_current_folder(tmp_path, monkeypatch):
    """Issue 51 (18): `runs/registry` was relative to wherever `run` was started."""
    from pipelines.settings import Settings
    from pipelines.targets.local import registry

    monkeypatch.chdir(tmp_path)
    assert Settings(output=str(tmp_path / "o")).local.registry == str(tmp_path / "o" / "registry")
    assert Settings().local.registry == "runs/latest/registry"
    assert Settings(output="o", registry="/shared/reg").local.registry == "/shared/reg"  # as given
    model = tmp_path / "m"
    model.mkdir()
    registry.register(model, tmp_path / "o" / "registry", "hpt-cnn", {"lineage": {}})
    listed = RUNNER.invoke(cli.app, ["models", "--output", str(tmp_path / "o"), "--format", "csv"])
    assert listed.exit_code == 0 and listed.stdout.splitlines()[1].startswith("hpt-cnn,v1,")
    default = RUNNER.invoke(cli.app, ["models"])
    assert "no models registered in runs/latest/registry" in default.output
