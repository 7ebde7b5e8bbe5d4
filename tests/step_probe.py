"""`python -m tests.step_probe [--say TEXT] [--fail] --result=R`: a stand-in for a step module.

Run by `step_process.run_module` in tests/test_step_process.py, afresh and forked from a
server that preloads it: it prints lines on stdout and stderr, and writes what it saw
(its arguments, whether `preload()` had run in its process, its pid) to `--result`.
"""

import sys

preloaded = "numpy" in sys.modules

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402


def preload() -> None:
    """What the fork server imports once (`numpy`, as the real steps import TensorFlow)."""
    import numpy  # noqa: F401


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--say", default="")
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    print(f"probe says {args.say}", flush=True)
    print("probe on stderr", file=sys.stderr, flush=True)
    if args.fail:
        print("ProbeError: asked to fail", file=sys.stderr, flush=True)
        return 3
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump({"say": args.say, "preloaded": preloaded, "pid": os.getpid()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
