"""Benchmark helpers compute what they claim, and the cheapest benchmark runs and writes JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import bench_pipeline, common, run_all
from tests.conftest import ROOT, run_env


def test_median_ratio_and_steady():
    assert common.median([3.0, 1.0, 2.0]) == 2.0
    assert common.median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        common.median([])
    assert common.ratio(6.0, 3.0) == 2.0
    assert common.ratio(1.0, 0.0) is None
    assert common.steady([9.0, 1.0, 2.0]) == [1.0, 2.0]
    assert common.steady([9.0]) == [9.0]  # never empty


def test_repeat_and_timed():
    calls = []
    times = common.repeat(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(times) == 3 and all(t >= 0 for t in times)
    assert len(calls) == 5
    seconds, value = common.timed(lambda: 42)
    assert value == 42 and seconds >= 0


def test_union_of_intervals():
    assert bench_pipeline.union_seconds([(0, 2), (1, 3), (5, 6)]) == 4
    assert bench_pipeline.union_seconds([(0, 10), (2, 3)]) == 10
    assert bench_pipeline.union_seconds([]) == 0


CPUINFO_AMX = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx_vnni avx512_bf16 amx_bf16 avx512_fp16 amx_tile

processor\t: 1
model name\t: some other model
flags\t\t: fpu
"""

CPUINFO_AVX2 = """\
processor\t: 0
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse2 avx avx2 fma
"""

CPUINFO_ARM = """\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd
"""


def test_cpuinfo_names_the_model_and_the_flags_that_matter():
    amx = common.parse_cpuinfo(CPUINFO_AMX)
    assert amx == {
        "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",  # the first processor's
        "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"],
    }
    assert common.describe_cpu(amx) == (
        "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (avx2 avx512f avx512_bf16 amx_bf16 amx_tile)"
    )
    avx2 = common.parse_cpuinfo(CPUINFO_AVX2)
    assert avx2 == {"cpu_model": "AMD EPYC 7B12", "cpu_flags": ["avx2"]}  # no bf16 units
    assert common.parse_cpuinfo("processor : 0\nflags : fpu sse2\n")["cpu_flags"] == []
    arm = common.parse_cpuinfo(CPUINFO_ARM)  # no x86 flags line: unknown, not "none"
    assert arm == {"cpu_model": None, "cpu_flags": None}
    assert common.describe_cpu({"processor": "aarch64", **arm}) == "aarch64 (flags unknown)"
    assert common.describe_cpu({"cpu_model": "X", "cpu_flags": []}).startswith("X (none of avx2")


def test_machine_record_holds_this_cpu(monkeypatch, tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text(CPUINFO_AVX2)
    monkeypatch.setattr(common, "CPUINFO", fake)
    m = common.machine()
    assert (m["cpu_model"], m["cpu_flags"]) == ("AMD EPYC 7B12", ["avx2"])
    monkeypatch.setattr(common, "CPUINFO", tmp_path / "missing")
    m = common.machine()
    assert m["cpu_model"] and m["cpu_flags"] is None  # the model from `platform`


def test_machine_record_holds_what_onednn_is_told(monkeypatch, tmp_path):
    """`ONEDNN_MAX_CPU_ISA=AVX2` runs a bf16 host as an AVX2-only one: it goes with the figures."""
    fake = tmp_path / "cpuinfo"
    fake.write_text(CPUINFO_AMX)
    monkeypatch.setattr(common, "CPUINFO", fake)
    for name in common.ONEDNN_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert common.machine()["onednn"] == {}
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    m = common.machine()
    assert m["onednn"] == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert common.describe_cpu(m).endswith(
        "(avx2 avx512f avx512_bf16 amx_bf16 amx_tile, ONEDNN_MAX_CPU_ISA=AVX2)"
    )


def test_write_result_and_readme_table(tmp_path):
    path = common.write_result(
        "demo", {"x": 1.5}, headline=[["speed-up", "2.0×"]], quick=True, results_dir=tmp_path
    )
    document = json.loads(path.read_text())
    assert document["name"] == "demo" and document["quick"] is True
    assert document["figures"] == {"x": 1.5}
    assert document["headline"] == [["speed-up", "2.0×"]]
    assert {"platform", "cpus", "tensorflow", "cpu_model", "cpu_flags"} <= set(document["machine"])
    assert document["commit"] and document["date"]

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{run_all.BEGIN}\nold\n{run_all.END}\noutro\n")
    run_all.update_readme(run_all.results_table({"demo": document}), readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert "| demo | speed-up | 2.0× |" in text and "quick settings" in text
    assert common.describe_cpu(document["machine"]) in text  # the CPU is named with the figures


def test_startup_benchmark_runs_and_writes_json(tmp_path):
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_startup",
            "--quick",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    document = json.loads((tmp_path / "startup.json").read_text())
    assert document["figures"]["tensorflow_free"] is True
    assert set(document["figures"]["commands"]) == {"help", "compile_vertex"}
    assert all(c["median_seconds"] > 0 for c in document["figures"]["commands"].values())


def test_hpt_stand_in_runs_the_local_studys_sampler():
    """`bench_hpt`'s stand-in study drives the sampler as the local study does."""
    from benchmarks import bench_hpt

    for algorithm in bench_hpt.ALGORITHMS:
        best = bench_hpt.stand_in_best(algorithm, seed=0, trials=3)
        assert 0.0 < best <= 1.0


def test_children_cpu_seconds_counts_a_childs_work_not_its_waiting():
    """The equal-work benchmark's CPU column: a busy child counts, a sleeping one hardly."""

    def child_cpu(code: str) -> float:
        before = common.children_cpu_seconds()
        subprocess.run([sys.executable, "-c", code], check=True)
        return common.children_cpu_seconds() - before

    busy = "import time\nwhile time.process_time() < 0.4: pass"
    idle = "import time\ntime.sleep(0.4)"
    assert child_cpu(busy) >= 0.4  # at least what the child itself counted
    assert child_cpu(idle) < 0.3  # the interpreter's start-up, not the sleep


def test_seed001_trainer_builds_the_same_network_as_our_resnet50():
    """Equal work: seed 001's model and our `resnet50` have the same weights, all trainable."""
    from benchmarks import seed001_trainer
    from trainer.models import MODELS, build_model

    seed = seed001_trainer.create_model(number_of_classes=10)
    ours = build_model(MODELS["resnet50"], {}, "none", (32, 32, 3), 10)
    assert seed.count_params() == ours.count_params() > 23_000_000
    assert len(seed.trainable_weights) == len(ours.trainable_weights)
    hidden, head = seed.layers[-2], seed.layers[-1]
    assert (hidden.units, head.units, head.activation.__name__) == (1016, 10, "softmax")
    assert type(seed.optimizer).__name__ == "Adam"
    assert float(seed.optimizer.learning_rate) == pytest.approx(1e-4)


def test_seed001_benchmark_alternates_equal_work_and_writes_its_table(monkeypatch, tmp_path):
    """The sides alternate on the same prepared images; medians, ratios and accuracies add up."""
    from benchmarks import bench_gpu, bench_seed001

    calls = []

    def fake_run(side, device, work, args, seed):
        train = sorted(p.name for p in (work / "source" / "train").rglob("*.png"))
        assert train == sorted(p.name for p in (work / "seeds" / "train").rglob("*.png"))
        assert (work / "prepared" / "metadata.json").is_file()
        calls.append((side, seed, len(train)))
        wall = {"seed001": 30.0, "ours": 10.0, "ours-float32": 15.0}[side] + seed - 42
        figures = {"wall": wall, "cpu": wall / 2, "val_accuracy": 0.5, "images_per_second": 4.0}
        if side == "seed001":
            return {**figures, "strategy": "CollectiveAllReduceStrategy"}
        return {**figures, "precision": "float32" if side == "ours-float32" else "bf16"}

    monkeypatch.setattr(bench_seed001, "run_side", fake_run)
    monkeypatch.setattr(bench_gpu, "detect_devices", lambda: {"gpus": [], "built_with_cuda": 0})
    tiny = "--image-size 32 --source-size 40 --train-images 16 --val-images 8 --batch-size 8"
    bench_seed001.main([*tiny.split(), "--runs", "3", "--results-dir", str(tmp_path)])
    document = json.loads((tmp_path / "seed001.json").read_text())
    figures = document["figures"]
    assert [c[0] for c in calls[:3]] == list(bench_seed001.SIDES)  # rotates each round
    assert [c[0] for c in calls[3:6]] == [*bench_seed001.SIDES[1:], "seed001"]
    assert {c[2] for c in calls} == {16}
    assert figures["runs"].keys() == {"cpu"}  # no GPU: no GPU rows
    assert figures["median"]["cpu"]["ours"]["wall"] == 11.0  # runs 10, 11, 12
    assert figures["paired_ratios"]["cpu"]["ours"] == [3.0, 31 / 11, 32 / 12]
    table = dict(document["headline"])
    assert table["cpu: whole process s, ours default (auto → bf16)"].startswith("11.00 = 2.82×")
    assert table["cpu: final val accuracy, seed 001 / ours auto / ours float32"] == (
        "0.500 / 0.500 / 0.500"
    )


def test_seed001_benchmark_refuses_unequal_work():
    """A training count that is not a multiple of the batch would give the sides unequal work."""
    from benchmarks import bench_seed001

    with pytest.raises(SystemExit) as raised:
        bench_seed001.main(["--train-images", "100", "--batch-size", "64"])
    assert raised.value.code == 2


@pytest.mark.slow
@pytest.mark.bench  # ~60 s of ResNet50 runs: `make test-bench` (and .ci/run), not `make test`
def test_seed001_benchmark_runs_both_trainers(tmp_path):
    """`bench_seed001 --quick`: both real trainers run and report a sane accuracy and speed."""
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_seed001",
            "--quick",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    runs = json.loads((tmp_path / "seed001.json").read_text())["figures"]["runs"]["cpu"]
    assert runs.keys() == {"seed001", "ours", "ours-float32"}
    for side in runs.values():
        assert 0.0 <= side[0]["val_accuracy"] <= 1.0 and side[0]["images_per_second"] > 0
    assert runs["ours-float32"][0]["precision"] == "float32"


def test_sync_bn_builder_synchronises_every_batchnorm_of_our_resnet50_and_nothing_else():
    """The synchronised side is our resnet50 with BatchNorm switched, entering as a team model."""
    import keras

    from benchmarks import sync_bn_models
    from trainer.models import MODELS, build_model
    from trainer.models.custom import inspect_builder

    spec = inspect_builder("benchmarks.sync_bn_models:resnet50")
    assert [h.name for h in spec.hyperparameters] == ["num_units", "trainable_blocks"]
    assert spec.min_image_size == MODELS["resnet50"].min_image_size == 32

    def batch_norms(model):
        return [
            layer
            for layer in model._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, keras.layers.BatchNormalization)
        ]

    ours = build_model(MODELS["resnet50"], {}, "none", (32, 32, 3), 4)
    synced = sync_bn_models.resnet50((32, 32, 3), 4)
    assert len(batch_norms(ours)) == len(batch_norms(synced)) == 53
    assert not any(layer.synchronized for layer in batch_norms(ours))
    assert all(layer.synchronized for layer in batch_norms(synced))
    assert synced.count_params() == ours.count_params()


def test_sync_bn_benchmark_alternates_the_sides_per_batch_and_writes_its_table(
    monkeypatch, tmp_path
):
    """Both sides per batch size, the order flipped each round; medians and the cost ratio."""
    from benchmarks import bench_sync_bn

    calls = []

    def fake_run(side, batch_size, work, args, seed):
        assert (work / "prepared" / "metadata.json").is_file()
        calls.append((side, batch_size, seed))
        wall = {"per-replica": 20.0, "synchronized": 30.0}[side] * (32 / batch_size) + seed - 42
        accuracy = {"per-replica": 0.5, "synchronized": 0.75}[side]
        return {
            "wall": wall,
            "images_per_second": 100 / wall,
            "val_accuracy": accuracy,
            "train_accuracy": accuracy + 0.1,
        }

    monkeypatch.setattr(bench_sync_bn, "run_side", fake_run)
    monkeypatch.setitem(bench_sync_bn.QUICK, "runs", 2)
    bench_sync_bn.main(["--quick", "--results-dir", str(tmp_path)])
    document = json.loads((tmp_path / "sync_bn.json").read_text())
    assert calls == [
        ("per-replica", 4, 42),
        ("synchronized", 4, 42),
        ("synchronized", 4, 43),
        ("per-replica", 4, 43),
    ]
    assert document["figures"]["median"]["4"]["synchronized"]["wall"] == 240.5
    table = dict(document["headline"])
    assert table["batch 4/replica: job wall s, per-replica / synchronized"] == (
        "160.5 / 240.5 (synchronized costs 1.50×)"
    )
    assert table["batch 4/replica: final val accuracy, per-replica / synchronized"] == (
        "0.500 / 0.750"
    )
    assert table["batch 4/replica: last epoch's train accuracy, per-replica / synchronized"] == (
        "0.600 / 0.850"
    )


def test_feature_cache_headline_of_some_sides_only():
    from benchmarks import bench_feature_cache

    run = {"seconds": 350.0, "best_val_accuracy": 0.5}
    rows = dict(bench_feature_cache.headline({"resnet50/frozen/seeds": [run]}, {}))
    assert rows["resnet50/frozen: study wall s (auto / off / seeds)"] == "nan / nan / 350.0"
    both = {"m/frozen/auto": [dict(run, seconds=50.0)], "m/frozen/off": [run]}
    rows = dict(bench_feature_cache.headline(both, {}))
    assert rows["m/frozen: speed-up cache auto vs off; ours (auto) vs seeds"] == "7.00x; nanx"


def test_feature_cache_ceilings_pair_the_rounds_and_leave_out_what_no_cache_removes():
    from benchmarks import bench_feature_cache

    def trial(tb, train, epochs, export=1.0):
        return {"trainable_blocks": tb, "train": train, "export": export, "epochs": epochs}

    def run(seconds, trials):
        epochs = sum(t["epochs"] for t in trials)
        return {
            "seconds": seconds,
            "best_val_accuracy": 1.0,
            "per_trial_seconds": trials,
            "breakdown_seconds": {"epochs": epochs},
        }

    whole = [trial(5, 49.0, 40.0), trial(5, 49.0, 40.0)]  # 100 s with their exports
    off = run(300.0, [trial(0, 20.0, 10.0), trial(2, 40.0, 30.0), *whole])
    auto = run(200.0, [trial(0, 2.0, 1.0), trial(2, 30.0, 19.0), *whole])
    other = run(100.0, [trial(0, 1.0, 1.0), trial(2, 20.0, 9.0), *whole])
    runs = {"r/mixed/auto": [auto, other], "r/mixed/off": [off, off]}
    rows = dict(bench_feature_cache.headline(runs, {}))
    # round 1: 300 / (100 + 1 + 19) = 2.5, round 2: 300 / (100 + 1 + 9) = 2.73; median 2.61
    key = (
        "r/mixed: most any cache can give (off ÷ off's whole-network trials + auto's other epochs)"
    )
    assert rows[key] == "2.61x"
    # epochs: 120 / 100 = 1.2 and 120 / 90 = 1.33; median 1.27
    assert rows["r/mixed: off ÷ auto in epochs alone"] == "1.27x"
    frozen = {"r/frozen/auto": [auto], "r/frozen/off": [run(300.0, [trial(0, 20.0, 10.0)])]}
    assert not any("cache can give" in r for r in dict(bench_feature_cache.headline(frozen, {})))


def test_prepare_scale_measures_a_process_tree_and_writes_the_curve_rows(tmp_path):
    from benchmarks import bench_prepare_scale as bench

    child = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        + repr("b = bytearray(200 << 20); import time; time.sleep(0.5)")
        + "])"
    )
    figures = bench.measured_run([sys.executable, "-c", child])
    assert figures["peak_tree_mb"] >= 200  # the grandchild's 200 MB, seen through its parent
    assert figures["wall_s"] >= 0.5
    assert bench.write_jpegs(tmp_path, 8, size=32) == sum(
        p.stat().st_size for p in tmp_path.rglob("*.jpg")
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c0", "c1", "c2", "c3"]

    def row(images, stored, workers, mb, wall, ratio):
        return {
            "images": images,
            "record_format": stored,
            "workers": workers,
            "peak_tree_mb": mb,
            "wall_s": wall,
            "written_over_source": ratio,
        }

    curve = [
        row(1000, "raw", 1, 700, 10, 23.4),
        row(1000, "encoded", 1, 690, 8, 1.25),
        row(4000, "raw", 1, 720, 40, 23.4),
        row(4000, "encoded", 1, 700, 30, 1.25),
        row(4000, "encoded", 2, 2100, 25, 1.25),
    ]
    rows = dict(bench.headline({"curve": curve}))
    assert rows["prepare raw: peak RSS (tree) at 1,000/4,000"] == "700 MB / 720 MB"
    assert rows["prepare encoded: wall, written ÷ source"] == "8.0 s, 1.25× / 30.0 s, 1.25×"
    assert rows["prepare_workers 1 → 2 at 4,000 (encoded): wall, peak tree"] == (
        "30.0 → 25.0 s, 700 → 2100 MB"
    )


def test_halving_benchmark_counts_a_trial_at_the_top_rung_by_its_last_epoch():
    """BEST_MEASUREMENT makes a trial's final measurement its best epoch, not its last."""
    from types import SimpleNamespace

    from benchmarks import bench_halving

    def trial(*steps: int, best: int) -> dict:
        return {
            "measurements": [{"stepCount": s} for s in steps],
            "finalMeasurement": {"stepCount": best, "metrics": []},
        }

    assert bench_halving._last_epoch(trial(1, 2, 3, best=2)) == 3
    assert bench_halving._last_epoch(trial(1, best=1)) == 1
    args = SimpleNamespace(
        trial_hour_minutes=30.0, on_demand_usd=1.0, spot_usd=0.25, price_source="x"
    )
    cost = bench_halving.paper_cost(243, 63, args)
    assert cost["full_budget_trial_hours"] == 50.0
    assert cost["asha_trial_hours"] == pytest.approx(50.0 * 63 / 243)
    assert cost["none_spot_usd"] == 12.5
