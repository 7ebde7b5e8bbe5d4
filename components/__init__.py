"""Kubeflow components: thin `@dsl.component` shells over plain project functions."""
