"""One BLAS thread for the in-process searches: `with one_thread(): scores = matrix @ q`.

numpy's OpenBLAS splits a matrix-vector product over every core it sees, then keeps its helper
threads spinning for a while before they sleep (its THREAD_TIMEOUT). A search's product is
memory-bound and short (10k x 384 float32: ~0.5 ms on one core), so the helpers buy little, and
on a small shared machine the spinning helper takes a core from the Python that follows the
search: measured on the 2-vCPU box under load, a recall at 10k memories (its question already
read) took 16 ms with the helpers and 5-6 ms with OpenBLAS held to one thread (README
"Performance", third round). Scores are the same either way: each row's dot product is one
thread's work in both cases.

The limit is set through threadpoolctl (a dependency of mnemo; the code still runs without it)
and is process-wide while held: nested and concurrent holders share one
limit, and the original setting comes back when the last leaves. It is measured to apply on the
thread that sets it (a recall's); OpenBLAS 0.3.31 may keep its own count on other threads, which
then search as before. Without threadpoolctl nothing is limited.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {"depth": 0, "limiter": None}


def _controller() -> Any | None:
    """Return the process's threadpoolctl controller (found once), or None without threadpoolctl."""
    if "ctl" not in _state:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _state["ctl"] = None
        else:
            _state["ctl"] = ThreadpoolController()
    return _state["ctl"]


@contextmanager
def one_thread() -> Iterator[None]:
    """Hold the BLAS libraries numpy uses to one thread while the block runs (see the module docstring)."""
    with _lock:
        ctl = _controller()
        if ctl is not None:
            if _state["depth"] == 0:
                _state["limiter"] = ctl.limit(limits=1, user_api="blas")
            _state["depth"] += 1
    try:
        yield
    finally:
        if ctl is not None:
            with _lock:
                _state["depth"] -= 1
                if _state["depth"] == 0:
                    _state["limiter"].restore_original_limits()
                    _state["limiter"] = None
