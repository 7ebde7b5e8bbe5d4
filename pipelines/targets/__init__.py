"""The targets: one package per target (`local`, `vertex`, `kubeflow`) holding all of it.

`pipelines/targets/<name>/` spans the rooms of ARCHITECTURE.md, each part in its own:
`cli/` (its client, preflight and commands) sits with the app, `wiring.py` (its `Binding`)
with the wiring, `steps/` (its component shells) with the components, and the rest is its
run-time side (clients, executors, jobs, studies, registries), which imports none of those.
A target is registered in one place, `pipelines/wiring/__init__.py:TARGETS`.
`earlier_runs.py` here reads earlier studies of every target (`continue_from`).
"""
