"""The targets' run-time side: what component bodies and the CLI call on each target.

One package per target (`local`, `vertex`, `kubeflow`) holding its clients and
executors (jobs, studies, registries, submissions). Which components run each step
is wired above the components, in `pipelines.wiring`; nothing here imports a
component or the pipeline.
"""
