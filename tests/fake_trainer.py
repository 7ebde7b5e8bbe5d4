"""A fast stand-in for `trainer.task`: reports a known function of its flags through hypertune.

Run as `python tests/fake_trainer.py --learning_rate=0.01 --momentum=0.9 ...`.
Any `--name=value` that is not a control flag is a hyperparameter. The metric
at epoch e is `objective(params) * (1 - 0.5**e)`, so curves rise with epochs
and better parameters are better at every epoch (what the median rule needs).

Control flags:
    --epochs=N          epochs to report (default 3)
    --sleep=S           seconds per epoch (default 0)
    --metric_tag=T      hypertune tag (default val_accuracy)
    --decay_after=E     after epoch E the metric falls (an over-training curve)
    --fail_at=E         exit 3 at epoch E (0: right after start-up)
    --tmp_file          leave a file in the temporary folder, as TensorFlow's autograph does
    --hang_at=E         sleep forever at epoch E (0: right after start-up)
    --silent            print nothing (with --hang_at=0: a replica that never joins)
    --ignore_sigterm    ignore SIGTERM, like MultiWorkerMirroredStrategy processes
    --task=TYPE         fail/hang/silent apply only to this TF_CONFIG task type (chief, worker…)
    --fail_trials=1,3   fail/hang/silent apply only to these CLOUD_ML_TRIAL_IDs
    --no_report         train without reporting any metric
    --ledger=PATH       on success append one JSON line: trial, task, params, env
    --starts=PATH       on start append one line: the trial id (every run, failed ones too)
    --falling           report `1 - value`: a loss, falling with epochs, lowest at the optimum
    --fail_code=N       the exit code of --fail_at (default 3)
    --fail_say=TEXT     the line printed (on stderr) before failing
    --resume            the chief checkpoints each epoch in $AIP_CHECKPOINT_DIR; every replica
                        resumes after the last one; past the last epoch, report it again (as
                        `trainer.train` does)
    --cost              after the last epoch report model_size_mb and latency_ms with its
                        step, as the trainer reports its cost (a function of num_units)
    --pid_dir=PATH      on start write PATH/<trial>-<task>.pid (its pid): a test may kill it
    --diverge_at=E      at epoch E report the worst value of every metric and exit 0, as the
                        trainer does when its loss diverges (with --fail_trials: only those)
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import tempfile
import time

CONTROL_FLAGS = {
    "epochs",
    "sleep",
    "metric_tag",
    "decay_after",
    "fail_at",
    "hang_at",
    "silent",
    "ignore_sigterm",
    "task",
    "fail_trials",
    "no_report",
    "ledger",
    "tmp_file",
    "starts",
    "falling",
    "resume",
    "fail_code",
    "fail_say",
    "cost",
    "diverge_at",
    "pid_dir",
}
ENV_KEYS = (
    "CLOUD_ML_TRIAL_ID",
    "CLOUD_ML_HP_METRIC_FILE",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
    "CLUSTER_SPEC",
    "TF_CONFIG",
    "HPT_LOGICAL_DEVICES",
    "HPT_CPU_THREADS",
    "TMPDIR",
)


def objective(params: dict) -> float:
    """1.0 at learning_rate=0.01, momentum=0.9, num_units=128; falls off smoothly around it."""
    lr = float(params.get("learning_rate", 0.01))
    momentum = float(params.get("momentum", 0.9))
    units = float(params.get("num_units", 128))
    distance = (
        (math.log10(lr) + 2.0) ** 2 / 0.5
        + (momentum - 0.9) ** 2 / 0.02
        + (math.log2(units) - 7.0) ** 2 / 8.0
    )
    return math.exp(-distance)


def epoch_value(params: dict, epoch: int, decay_after: int = 0) -> float:
    """The metric reported at `epoch`."""
    value = objective(params) * (1.0 - 0.5**epoch)
    if decay_after and epoch > decay_after:
        value *= 0.5 ** (epoch - decay_after)
    return value


def parse(argv: list[str]) -> tuple[dict, dict]:
    """`--name=value` flags → (control flags, hyperparameters)."""
    control: dict = {}
    params: dict = {}
    for arg in argv:
        if not arg.startswith("--"):
            raise SystemExit(f"fake_trainer: unexpected argument {arg!r}")
        name, _, raw = arg[2:].partition("=")
        value: object = raw if raw else True
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                pass
        (control if name in CONTROL_FLAGS else params)[name] = value
    return control, params


def _diverge(reporter: object, epoch: int) -> int:
    """What the trainer does when its loss diverges: the worst values, its line, exit 0."""
    from trainer.contract import DIVERGED_METRIC_VALUE, METRIC_GOALS

    for tag, goal in METRIC_GOALS.items():
        if reporter is not None:
            reporter.report_hyperparameter_tuning_metric(  # type: ignore[attr-defined]
                hyperparameter_metric_tag=tag,
                metric_value=DIVERGED_METRIC_VALUE[goal],
                global_step=epoch,
            )
    print(
        f"trainer: training diverged at epoch {epoch} (train_loss=nan); reported "
        "val_accuracy=0.0 (the worst value), nothing exported",
        file=sys.stderr,
        flush=True,
    )
    return 0


def main(argv: list[str]) -> int:
    control, params = parse(argv)
    if control.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {}).get("type", "chief")
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
    targeted = control.get("task", task) == task and (
        "fail_trials" not in control
        or trial in str(control["fail_trials"]).replace(" ", "").split(",")
    )
    silent = control.get("silent") and targeted
    say = (lambda *a: None) if silent else (lambda *a: print(*a, flush=True))
    fail_at = control.get("fail_at") if targeted else None
    hang_at = control.get("hang_at") if targeted else None
    say(f"fake_trainer: {task} trial={trial or '-'} params={json.dumps(params, sort_keys=True)}")
    if control.get("pid_dir"):
        pid_file = os.path.join(str(control["pid_dir"]), f"{trial}-{task}.pid")
        with open(pid_file + ".tmp", "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
        os.replace(pid_file + ".tmp", pid_file)
    if control.get("starts") and task == "chief":
        with open(str(control["starts"]), "a", encoding="utf-8") as f:
            f.write(f"{trial}\n")

    if control.get("tmp_file"):  # as TensorFlow's autograph does
        with tempfile.NamedTemporaryFile("w", prefix="fake_autograph", delete=False) as f:
            f.write("# generated\n")
    reporter = None
    # As the real trainer: report only when tuning asks for it (else hypertune's
    # default /tmp/hypertune would be written).
    tuning = os.environ.get("CLOUD_ML_TRIAL_ID") or os.environ.get("CLOUD_ML_HP_METRIC_FILE")
    if tuning and not control.get("no_report"):
        import hypertune

        reporter = hypertune.HyperTune()
    epochs = int(control.get("epochs", 3))
    checkpoint = os.path.join(os.environ.get("AIP_CHECKPOINT_DIR", "."), "fake_epoch")
    done = 0
    if control.get("resume") and os.path.exists(checkpoint):
        with open(checkpoint, encoding="utf-8") as f:
            done = int(f.read())
        say(f"fake_trainer: resuming after epoch {done}")
    for epoch in range(0, epochs + 1):
        if 0 < epoch <= done:
            continue
        if epoch == fail_at:
            say(f"fake_trainer: failing at epoch {epoch}")
            if control.get("fail_say"):
                print(str(control["fail_say"]).replace("_", " "), file=sys.stderr, flush=True)
            return int(control.get("fail_code", 3))
        if epoch == hang_at:
            say(f"fake_trainer: hanging at epoch {epoch}")
            while True:
                time.sleep(3600)
        if epoch == 0:
            continue
        if targeted and epoch == control.get("diverge_at"):
            return _diverge(reporter if task == "chief" else None, epoch)
        time.sleep(float(control.get("sleep", 0)))
        value = epoch_value(params, epoch, int(control.get("decay_after", 0)))
        if control.get("falling"):
            value = 1.0 - value
        if reporter is not None and task == "chief":
            reporter.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=control.get("metric_tag", "val_accuracy"),
                metric_value=value,
                global_step=epoch,
            )
        say(f"epoch {epoch}: {control.get('metric_tag', 'val_accuracy')}={value:.6f}")
        if control.get("resume") and task == "chief":  # as the trainer: the chief's is kept
            os.makedirs(os.path.dirname(checkpoint), exist_ok=True)
            with open(checkpoint, "w", encoding="utf-8") as f:
                f.write(str(epoch))
    if control.get("resume") and done >= epochs and reporter is not None and task == "chief":
        value = epoch_value(params, epochs, int(control.get("decay_after", 0)))
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=control.get("metric_tag", "val_accuracy"),
            metric_value=1.0 - value if control.get("falling") else value,
            global_step=epochs,
        )
    if control.get("cost") and reporter is not None and task == "chief":
        units = float(params.get("num_units", 128))
        for tag, value in (("model_size_mb", units / 100), ("latency_ms", 1 + units / 64)):
            reporter.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=tag, metric_value=value, global_step=epoch
            )
    if control.get("ledger"):
        record = {
            "trial": trial,
            "task": task,
            "params": params,
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        }
        with open(str(control["ledger"]), "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
