"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/client.py."""

import importlib

# mutmut forks each mutant's run from a process that imported the test files: what the code
# under test imports lazily is imported here, or a child importing it on a loaded machine
# outlasts its time limit (a false timeout, not a kill).
PRELOADED = [
    importlib.import_module("google.auth"),
    importlib.import_module("google.cloud.aiplatform"),
    importlib.import_module("google.cloud.aiplatform_v1"),
    importlib.import_module("google.protobuf.json_format"),
]
