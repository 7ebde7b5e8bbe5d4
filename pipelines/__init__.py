"""Payload builders, local executors, the pipeline definition, compiler and CLI (no TensorFlow)."""
