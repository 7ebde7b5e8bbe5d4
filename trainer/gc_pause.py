"""Python's cyclic garbage collector paused while a process imports TensorFlow."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, then freeze what it created.

    Importing TensorFlow and Keras creates ~440,000 long-lived objects, and the
    collector's passes over them while they are created cost 0.3-0.4 s of a ~2 s
    import here (issue 18). Afterwards the survivors move to the permanent
    generation (`gc.freeze`), so later collections skip them and a fork server's
    children do not write to their pages; cycles already unreachable then (~2,000
    objects after TensorFlow's import) are never freed. The collector is left
    enabled or disabled as it was found.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
