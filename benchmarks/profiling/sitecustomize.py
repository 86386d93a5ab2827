"""Profile a node process this benchmark starts (``benchmarks/scale.py``).

With ``FLOODMARK_PROFILE_DIR=DIR`` in the environment, and this directory first on
``PYTHONPATH``, every Python process started runs under cProfile and writes
``DIR/<pid>.prof`` when it exits normally (a SIGTERM'd broker's controlled shutdown does;
a SIGKILLed one writes nothing). Read one with
``python -c "import pstats; pstats.Stats('DIR/123.prof').sort_stats('cumtime').print_stats(30)"``.
"""

from __future__ import annotations

import atexit
import cProfile
import os

_DIR = os.environ.get("FLOODMARK_PROFILE_DIR")
if _DIR:
    _profile = cProfile.Profile()

    def _dump() -> None:
        _profile.disable()
        _profile.dump_stats(os.path.join(_DIR, f"{os.getpid()}.prof"))

    atexit.register(_dump)
    _profile.enable()
