"""What Katib's suggestion services propose for one request, as their sources behave.

Katib's experiment controller asks the Experiment's suggestion service for the trials it
may add, up to `parallelTrialCount` at once (`experiment_controller.go` l.316-333,
kubeflow/katib v0.19.0), as `current_request_number`. Which service answers is
`katib-config.yaml`'s (`suggestion-hyperopt` for `random` and `tpe`, `suggestion-optuna`
for `multivariate-tpe` and `grid`). Modelled here, so the algorithm choice is tested:

* `tpe` (hyperopt, `pkg/suggestion/v1beta1/hyperopt/base_service.py`): one seed per request
  (l.275); the first request draws its trials at random together (l.292-301), every later
  one calls `tpe.suggest` once per trial, in a loop, with that seed and the same trials
  (l.303-311), so each trial of the request gets the same configuration (katib#1329, closed
  unfixed).
* `random` (hyperopt): one `rand.suggest` call for the whole request (l.279-285), distinct.
* the Optuna services (`pkg/suggestion/v1beta1/optuna/base_service.py` l.68-83): one
  `study.ask` per trial, distinct (`constant_liar` for TPE).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_PARALLEL = 3  # experiments/v1beta1/constants.go: DefaultTrialParallelCount
REPEATS_WITHIN_REQUEST = ("tpe",)


def distinct_configurations(algorithm: str, request_size: int, *, first_request: bool) -> int:
    """How many distinct configurations the service proposes for a request of `request_size`."""
    if algorithm in REPEATS_WITHIN_REQUEST and not first_request:
        return min(request_size, 1)
    return request_size


def repeated_configurations(spec: Mapping[str, Any]) -> str | None:
    """Why the Experiment's service would run one configuration as several trials, or None.

    Args:
        spec: The Experiment's spec (camelCase dict).
    """
    algorithm = str((spec.get("algorithm") or {}).get("algorithmName") or "")
    parallel = int(spec.get("parallelTrialCount") or DEFAULT_PARALLEL)
    if distinct_configurations(algorithm, parallel, first_request=False) == parallel:
        return None
    return (
        f"with spec.parallelTrialCount={parallel}, Katib's {algorithm} service proposes one "
        "configuration for every trial of a request after the first (run time: hyperopt "
        "base_service.py l.303-311, katib#1329); use multivariate-tpe"
    )
