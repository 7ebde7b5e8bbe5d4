"""Where trials are compared: MLflow runs for a study, its trials and the final job."""
