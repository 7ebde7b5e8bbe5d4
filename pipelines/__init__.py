"""Payload builders, local executors, the pipeline definition, compiler and CLI (no TensorFlow).

Five tables say what exists; a new model, target, algorithm, metric or preset is one entry
in one of them. Each is its own because each is read by a different side of a boundary:

* `trainer.models.MODELS` (the model catalogue): name → `ModelSpec`. TF-free so that the
  settings, the CLI and the search-space checks read a model's flags and presets without
  importing what builds it.
* `pipelines.wiring.TARGETS`: the targets, each a package `pipelines/targets/<target>/`
  imported by name, so compiling for one target never imports another's SDK.
* `ALGORITHMS`: Vertex's names in `pipelines/study/options.py` (what a user writes and
  Vertex receives), and one translation per other executor beside the code that speaks
  its language: Optuna's samplers in `pipelines/study/sampler.py`, Katib's names in
  `pipelines/targets/kubeflow/experiment.py`. Folding them into one table would make the
  study package import each executor's vocabulary.
* `trainer.contract.METRIC_GOALS`: metric tag → goal. The trainer reports by it and the
  pipeline refuses unknown tags by it, so it lives in the contract both import.
* `pipelines/study/presets/`: search spaces as YAML files, a folder because users read,
  copy and edit them as files (`--search-space FILE` takes their format).
"""
