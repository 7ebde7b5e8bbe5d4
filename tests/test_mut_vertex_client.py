"""Behaviour tests that kill mutmut's mutants of pipelines/targets/vertex/client.py."""
