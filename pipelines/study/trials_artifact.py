"""The trials as a KFP artifact: the JSON file plus a summary in the artifact's metadata."""

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.study import continuation
from pipelines.study import trials as trials_lib


def summary(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts per state (and per outcome, `trials.trial_outcome`), the ids, for artifact views."""
    states: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    for trial in trials:
        name = trials_lib.trial_state(trial).name
        states[name] = states.get(name, 0) + 1
        word = trials_lib.trial_outcome(trial)
        outcomes[word] = outcomes.get(word, 0) + 1
    return {
        "trial_count": len(trials),
        "states": states,
        "outcomes": outcomes,
        "trial_ids": [str(t["id"]) for t in trials],
        "continued_from": continuation.sources(trials),
    }


def write(
    artifact: Any, trials: Sequence[Mapping[str, Any]], *, source: str, study_dir: str
) -> None:
    """Write trials JSON at `artifact.path` and describe them in its metadata.

    Every target's trials pass here: a diverged trial (a service records it SUCCEEDED with
    the worst values) is written INFEASIBLE as diverged (`trials.mark_diverged`).
    """
    trials = [trials_lib.mark_diverged(t) for t in trials]
    trials_lib.write_trials(artifact.path, trials)
    artifact.metadata.update({"source": source, "study": study_dir, **summary(trials)})


def read(artifact: Any) -> list[dict[str, Any]]:
    """Trials of a trials artifact (states as ints)."""
    return trials_lib.read_trials(artifact.path)
