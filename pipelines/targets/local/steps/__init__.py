"""The `local` target's component shells, one per step it binds (the components' room)."""
