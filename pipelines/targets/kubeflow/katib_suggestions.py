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
* `hyperband` (`pkg/suggestion/v1beta1/hyperband/service.py`, kubeflow/katib 33c8ff4): it
  takes the request's size as its bracket size (l.51) and answers a promotion request with
  fewer trials than asked (l.148-149), which the controller rejects, state unsaved, on every
  retry (`suggestionclient.go` l.124-128; katib#1168, katib#1389 open): `hyperband_trials`.
"""

from __future__ import annotations

import math
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


def hyperband_trials(parallel: int, max_trials: int, eta: int, max_epochs: int) -> list[int]:
    """The epochs (resource) of each trial Katib's `hyperband` creates before it stops.

    The controller asks for `min(parallel, max_trials - completed)` trials
    (`experiment_controller.go` l.305-316; modelled in hyperband's best case, every trial
    done before the next request) and stops the study for good on a reply of another length.
    The service's state is its settings, written back as strings (`generate`, `convert`):
    its rung `r` is truncated to an integer after the first reply.

    Args:
        parallel: `parallelTrialCount`.
        max_trials: `maxTrialCount`.
        eta: The `eta` setting.
        max_epochs: `r_l`, the top rung.
    """
    s = s_max = int(math.log(max_epochs) / math.log(eta))
    i, evaluating, r = 0, 0, max_epochs * eta ** (-s_max)
    made: list[int] = []
    while s >= 0 and (request := min(parallel, max_trials - len(made))) > 0:
        if evaluating == 0:  # _make_master_bracket: `n` is the request (l.51)
            reply = [int(r)] * request
        else:  # _make_child_bracket: the top ceil(n_i / eta) of the last rung
            top = math.ceil(math.ceil(request * eta ** (-i)) / eta)
            i += 1
            if i > s:  # _update_hbParameters: the next bracket
                s, i, r = s - 1, 0, max_epochs * eta ** (-(s - 1))
            reply = [int(r * eta**i)] * top
        if len(reply) != request:
            return made  # "The response contains unexpected trials", on every retry
        made += reply
        evaluating = len(reply) if i < s else 0
        if evaluating == 0:  # _new_hbParameters
            s, i, r = s - 1, 0, max_epochs * eta ** (-(s - 1))
        r = int(float(str(r)))
    return made


def hyperband_min_parallel(eta: int, max_epochs: int) -> int:
    """The least `parallelTrialCount` hyperband admits (`ValidateAlgorithmSettings`, l.279-285)."""
    return int(math.ceil(eta ** int(math.log(max_epochs) / math.log(eta))))


def hyperband_outcome(parallel: int, max_trials: int, eta: int, max_epochs: int) -> str:
    """What Katib's `hyperband` would run for the study, in one clause (`hyperband_trials`)."""
    parallel = max(parallel, hyperband_min_parallel(eta, max_epochs))
    made = hyperband_trials(parallel, max_trials, eta, max_epochs)
    ran = (
        f"Katib's hyperband (parallelTrialCount={parallel}, eta={eta}, r_l={max_epochs}) "
        f"would run {len(made)} of {max_trials} trials, at epochs {sorted(set(made))}"
    )
    if len(made) < max_trials:
        return (
            f"{ran}, then stall: it answers a promotion request with fewer trials than asked, "
            "which Katib's controller rejects on every retry (hyperband/service.py l.51, "
            "l.148-149; suggestionclient.go l.124-128; katib#1168)"
        )
    return f"{ran}: {made.count(max_epochs)} at epochs={max_epochs}"
