"""The open-source Kubeflow target: Katib tunes, a TFJob retrains, Kubeflow Pipelines schedules."""
