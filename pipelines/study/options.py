"""The study's options in Vertex's names: search algorithms and measurement selections."""

from pipelines.study.search_space import SearchSpace, SearchSpaceError

# HyperparameterTuningJob study_spec.algorithm: ALGORITHM_UNSPECIFIED is Vertex's
# Bayesian optimisation (the local study: Optuna TPE).
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
# study_spec.measurement_selection_type: which measurement is the trial's final one.
MEASUREMENT_SELECTIONS = ("BEST_MEASUREMENT", "LAST_MEASUREMENT")
# The median stopping rule, on every target (Optuna's MedianPruner, Katib's medianstop):
# completed trials needed before any trial is stopped, and the first step judged.
MEDIAN_STOP_MIN_TRIALS = 3
MEDIAN_STOP_START_STEP = 1


def check_algorithm(space: SearchSpace, algorithm: str) -> None:
    """Refuse a search the algorithm cannot do, before anything runs.

    Grid search needs a finite set of values for every parameter: a double has none.

    Raises:
        SearchSpaceError: One line naming the parameter.
    """
    if algorithm != "GRID_SEARCH":
        return
    for p in space.all_parameters():
        if p.type == "double":
            raise SearchSpaceError(
                f"algorithm=GRID_SEARCH: parameter {p.parameter_id!r} is a double, which has "
                "no grid; make it discrete or integer, or use another algorithm"
            )
