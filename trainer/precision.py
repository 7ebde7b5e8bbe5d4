"""The compute precision a run trains in: `--precision=auto` resolved on the machine that trains.

`auto` (the default) picks `mixed_bfloat16` where the hardware computes in bf16
natively and float32 elsewhere, so one payload is fast on every trial machine:
the choice is made at run time, by the trainer, from what the host has. The
rule (`choose`) is a pure function of the facts fed to it; `cpu_flags` reads
this machine's CPU flags, `onednn_limit` what the environment tells oneDNN (off, or
capped below bf16). No TensorFlow import here: the GPU facts are read by
the caller that has TensorFlow loaded (`trainer.train.resolve_precision`).

mixed_float16 (loss scaling, Volta/Turing tensor cores) is not offered: its gain
on 7.x GPUs has not been measured here, and an unmeasured policy would be a guess.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from trainer.contract import AUTO_PRECISION, PRECISIONS, ContractError

# CPU flags (as /proc/cpuinfo spells them) of units that compute bf16 natively.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# GPUs with bf16 tensor cores: Ampere (8.0) and later.
BF16_GPU_CAPABILITY = (8, 0)
# TensorFlow's CPU kernels compute bf16 natively only through oneDNN. Its switch (on by
# default on x86 Linux) and the environment variables that cap the instruction set oneDNN
# dispatches to (the older name second). Without oneDNN, bf16 gradients ran ~10× slower
# than float32 here; capped at AVX2, bf16 convolutions fail ("could not create a primitive
# descriptor"); capped at AVX512_CORE, they ran 2-5× slower than with bf16 units.
ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"
ONEDNN_ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# Caps (oneDNN's names) below the first instruction set with bf16 arithmetic, AVX512_CORE_BF16.
ISA_CAPS_WITHOUT_BF16 = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_MIC",
    "AVX512_MIC_4OPS",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
)
CPUINFO = "/proc/cpuinfo"
_LINE = re.compile(r"^precision: (?P<policy>\S+) \((?P<reason>.*)\)$")


@dataclasses.dataclass(frozen=True)
class Choice:
    """The resolved precision and why.

    Attributes:
        requested: What the flag said (`auto`, `float32`, `mixed_bfloat16`).
        policy: The Keras mixed-precision policy trained under.
        reason: One phrase: the hardware fact behind an `auto` choice, or `forced`.
    """

    requested: str
    policy: str
    reason: str

    @property
    def line(self) -> str:
        """The trainer's log line, e.g. `precision: mixed_bfloat16 (auto: CPU has avx512_bf16)`."""
        return f"precision: {self.policy} ({self.reason})"


def choose(
    requested: str,
    cpu_flags: Iterable[str],
    gpu_capabilities: Sequence[tuple[int, int]],
    cpu_limit: str | None = None,
) -> Choice:
    """Resolve `requested` against the hardware facts given.

    Args:
        requested: One of `trainer.contract.PRECISIONS`.
        cpu_flags: The CPU's feature flags (`/proc/cpuinfo` names).
        gpu_capabilities: (major, minor) compute capability of each visible GPU; empty on a
            CPU-only host. With GPUs the model runs on them, so the CPU does not matter.
        cpu_limit: Why the CPU kernels cannot use bf16 units even if the CPU has them
            (`onednn_limit`), or None.

    Returns:
        The policy, and why.

    Raises:
        ContractError: `requested` is not a known precision.
    """
    if requested not in PRECISIONS:
        raise ContractError(f"--precision={requested}: expected one of {', '.join(PRECISIONS)}")
    if requested != AUTO_PRECISION:
        return Choice(requested, requested, "forced by --precision")
    if gpu_capabilities:
        lowest = min(gpu_capabilities)
        capability = f"{lowest[0]}.{lowest[1]}"
        if lowest >= BF16_GPU_CAPABILITY:
            return Choice(requested, "mixed_bfloat16", f"auto: GPU compute capability {capability}")
        return Choice(
            requested, "float32", f"auto: GPU compute capability {capability}, no bf16 units"
        )
    if cpu_limit:
        return Choice(requested, "float32", f"auto: {cpu_limit}")
    flags = set(cpu_flags)
    native = [f for f in BF16_CPU_FLAGS if f in flags]
    if native:
        return Choice(requested, "mixed_bfloat16", f"auto: CPU has {'+'.join(native)}")
    return Choice(requested, "float32", f"auto: CPU lacks {'/'.join(BF16_CPU_FLAGS)}")


def onednn_limit(environ: Mapping[str, str]) -> str | None:
    """Why oneDNN, as `environ` configures it, cannot compute bf16 natively (None: it can)."""
    if environ.get(ONEDNN_SWITCH, "").strip().lower() in ("0", "false"):
        return f"oneDNN off ({ONEDNN_SWITCH}={environ[ONEDNN_SWITCH]})"
    for name in ONEDNN_ISA_CAPS:
        cap = environ.get(name, "").strip().upper()
        if cap:  # oneDNN reads the first one set
            if cap in ISA_CAPS_WITHOUT_BF16:
                return f"oneDNN limited to {cap} ({name})"
            return None
    return None


def cpu_flags(path: str = CPUINFO) -> frozenset[str]:
    """This host's CPU feature flags (empty where `/proc/cpuinfo` is unreadable or has none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def parse_line(text: str) -> str | None:
    """The policy a trainer log names in its `precision:` line (the last one), or None."""
    found = None
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            found = match.group("policy")
    return found
