"""The command line (Typer): `pipelines.app.cli` and one module per group of commands.

A command's parameters are its interface, so they stay one flat list however long: Typer builds
the flags and `--help` from the Python signature. Each command checks and hands on to plain
functions (`dispatch.py` reaches a target's binding); a long command is its flags spelled out.
"""
