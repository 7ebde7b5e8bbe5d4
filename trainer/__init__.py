"""Distributed TensorFlow trainer: `python -m trainer.task` (Vertex custom-job and HPT contract)."""
