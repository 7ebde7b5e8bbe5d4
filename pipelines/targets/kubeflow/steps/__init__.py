"""The `kubeflow` target's component shells, one per step it binds (the components' room)."""
