"""Strict check of an HPT study payload as the API's `StudySpec` (`pipelines.vertex_types`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.payloads import PayloadError, payload_items, strict_parse
from pipelines.study.options import ALGORITHMS, MEASUREMENT_SELECTIONS

MEASUREMENT_SELECTION_TYPES = (*MEASUREMENT_SELECTIONS, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED")


def validate_study_spec(
    parameters: Sequence[Mapping[str, Any] | str],
    metrics: Sequence[Mapping[str, Any] | str],
    algorithm: str = "ALGORITHM_UNSPECIFIED",
    measurement_selection: str = "BEST_MEASUREMENT",
) -> Any:
    """Strictly parse an HPT study payload as the API's `StudySpec` message.

    Args:
        parameters: `study_spec_parameters` (dicts or JSON strings).
        metrics: `study_spec_metrics`.
        algorithm: `study_spec_algorithm`.
        measurement_selection: `study_spec_measurement_selection_type`.

    Raises:
        PayloadError: naming the field Vertex would refuse.
    """
    if algorithm not in ALGORITHMS:
        raise PayloadError(
            f"study_spec_algorithm={algorithm!r}: expected one of {', '.join(ALGORITHMS)}"
        )
    if measurement_selection not in MEASUREMENT_SELECTION_TYPES:
        raise PayloadError(
            f"study_spec_measurement_selection_type={measurement_selection!r}: expected one of "
            f"{', '.join(MEASUREMENT_SELECTION_TYPES)}"
        )
    load = payload_items(parameters)
    load_metrics = payload_items(metrics)
    if not load:
        raise PayloadError("study_spec_parameters: empty, expected at least one parameter")
    if not load_metrics:
        raise PayloadError("study_spec_metrics: empty, expected at least one metric")
    payload = {
        "parameters": load,
        "metrics": load_metrics,
        "algorithm": algorithm,
        "measurement_selection_type": measurement_selection,
    }
    return strict_parse("StudySpec", payload, "study_spec")


def applied_selection(measurement_selection: str) -> str:
    """The measurement selection a study applies: Vertex's default (unspecified) is the best."""
    return "LAST_MEASUREMENT" if measurement_selection == "LAST_MEASUREMENT" else "BEST_MEASUREMENT"
