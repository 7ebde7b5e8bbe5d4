"""The `vertex` target's command line: its client, preflight and commands (the app's room)."""
