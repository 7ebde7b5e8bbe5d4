"""The study's options in Vertex's names: search algorithms and measurement selections."""

# HyperparameterTuningJob study_spec.algorithm: ALGORITHM_UNSPECIFIED is Vertex's
# Bayesian optimisation (the local study: Optuna TPE).
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
# study_spec.measurement_selection_type: which measurement is the trial's final one.
MEASUREMENT_SELECTIONS = ("BEST_MEASUREMENT", "LAST_MEASUREMENT")
