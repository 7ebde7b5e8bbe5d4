"""`--precision=auto`: the policy each kind of hardware gets, from facts fed in (not this host)."""

from __future__ import annotations

import pytest

from trainer.contract import ContractError
from trainer.precision import Choice, choose, cpu_flags, onednn_limit, parse_line

AVX2_ONLY = {"fpu", "sse4_2", "avx", "avx2", "fma", "avx512f"}


@pytest.mark.parametrize(
    ("flags", "gpus", "policy", "reason"),
    [
        (AVX2_ONLY | {"avx512_bf16"}, [], "mixed_bfloat16", "auto: CPU has avx512_bf16"),
        (AVX2_ONLY | {"amx_bf16", "amx_tile"}, [], "mixed_bfloat16", "auto: CPU has amx_bf16"),
        (
            AVX2_ONLY | {"avx512_bf16", "amx_bf16"},
            [],
            "mixed_bfloat16",
            "auto: CPU has avx512_bf16+amx_bf16",
        ),
        (AVX2_ONLY, [], "float32", "auto: CPU lacks avx512_bf16/amx_bf16"),
        (set(), [], "float32", "auto: CPU lacks avx512_bf16/amx_bf16"),
        # With GPUs the model runs there: the CPU's flags do not count.
        (AVX2_ONLY, [(8, 0)], "mixed_bfloat16", "auto: GPU compute capability 8.0"),
        (AVX2_ONLY, [(9, 0), (9, 0)], "mixed_bfloat16", "auto: GPU compute capability 9.0"),
        (
            AVX2_ONLY | {"avx512_bf16"},
            [(7, 5)],
            "float32",
            "auto: GPU compute capability 7.5, no bf16 units",
        ),
        # Mixed GPUs: the weakest decides (every replica runs the same policy).
        (AVX2_ONLY, [(8, 6), (7, 0)], "float32", "auto: GPU compute capability 7.0, no bf16 units"),
    ],
)
def test_auto_picks_bf16_only_where_it_is_native(flags, gpus, policy, reason):
    choice = choose("auto", flags, gpus)
    assert choice == Choice("auto", policy, reason)
    assert choice.line == f"precision: {policy} ({reason})"


@pytest.mark.parametrize(
    ("environ", "limit"),
    [
        ({}, None),
        ({"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "ALL"}, None),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, None),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, None),
        ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "oneDNN off (TF_ENABLE_ONEDNN_OPTS=0)"),
        ({"TF_ENABLE_ONEDNN_OPTS": "False"}, "oneDNN off (TF_ENABLE_ONEDNN_OPTS=False)"),
        ({"ONEDNN_MAX_CPU_ISA": "avx2"}, "oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA)"),
        (
            {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
            "oneDNN limited to AVX512_CORE (ONEDNN_MAX_CPU_ISA)",
        ),
        ({"DNNL_MAX_CPU_ISA": "AVX2"}, "oneDNN limited to AVX2 (DNNL_MAX_CPU_ISA)"),
        # oneDNN reads ONEDNN_MAX_CPU_ISA first.
        ({"ONEDNN_MAX_CPU_ISA": "ALL", "DNNL_MAX_CPU_ISA": "AVX2"}, None),
    ],
)
def test_onednn_settings_that_rule_out_bf16_units(environ, limit):
    assert onednn_limit(environ) == limit
    choice = choose("auto", AVX2_ONLY | {"avx512_bf16", "amx_bf16"}, [], limit)
    assert choice.policy == ("float32" if limit else "mixed_bfloat16")
    assert choice.reason == (f"auto: {limit}" if limit else "auto: CPU has avx512_bf16+amx_bf16")
    # On GPUs the model does not run in oneDNN's kernels; forced stays forced.
    assert choose("auto", AVX2_ONLY, [(8, 0)], limit).policy == "mixed_bfloat16"
    assert choose("mixed_bfloat16", AVX2_ONLY, [], limit).policy == "mixed_bfloat16"


@pytest.mark.parametrize("forced", ["float32", "mixed_bfloat16"])
def test_a_forced_precision_is_kept_whatever_the_hardware(forced):
    for flags, gpus in [(AVX2_ONLY, []), (AVX2_ONLY | {"amx_bf16"}, []), (set(), [(7, 0)])]:
        assert choose(forced, flags, gpus) == Choice(forced, forced, "forced by --precision")


def test_an_unknown_precision_is_refused_in_one_line():
    with pytest.raises(ContractError) as error:
        choose("fp16", AVX2_ONLY, [])
    assert str(error.value) == "--precision=fp16: expected one of auto, float32, mixed_bfloat16"


def test_cpu_flags_are_read_from_cpuinfo_on_x86_and_arm(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\n")
    assert cpu_flags(str(x86)) == {"fpu", "avx2", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert cpu_flags(str(arm)) == {"fp", "asimd", "bf16"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_the_log_line_is_read_back_as_the_trials_table_reads_it():
    log = "\n".join(
        [
            "I0000 port.cc:153] oneDNN custom operations are on.",
            choose("auto", AVX2_ONLY, []).line,
            "training: default, 1 replica(s) in sync, ...",
        ]
    )
    assert parse_line(log) == "float32"
    assert parse_line("no precision here\nprecision: nonsense") is None
