"""floodmark: a Kafka-compatible replicated commit log in Python."""

import sys as _sys

__version__ = "0.1.0"


def _started_as_floodmark() -> bool:
    """Is this process a floodmark command (``python -m floodmark...`` or the ``floodmark``
    script), rather than a program that imports floodmark (pytest, a notebook, Spark)?"""
    argv = getattr(_sys, "orig_argv", [])
    if "-m" in argv[:-1]:
        return str(argv[argv.index("-m") + 1]).startswith("floodmark")
    return len(argv) > 1 and str(argv[1]).rsplit("/", 1)[-1] == "floodmark"


def _started_as_pyspark_worker() -> bool:
    """Is this process one of PySpark's Python workers (``python -m pyspark.daemon`` and the
    workers it forks, ``pyspark.worker``, the data source planners and the streaming source
    runner), which import floodmark to run its data source?"""
    argv = getattr(_sys, "orig_argv", [])
    return "-m" in argv[:-1] and str(argv[argv.index("-m") + 1]).startswith("pyspark.")


# kio registers Hypothesis strategies for its types whenever Hypothesis is importable (it is in
# a development install): about a quarter of a broker's or a CLI command's start-up CPU, and
# the test suite starts a great many of them; 0.45 CPU s of every fresh Spark Python worker that
# reads or writes with floodmark's data source. floodmark's own code never imports Hypothesis, so
# a floodmark process and a PySpark worker hide it, as in a user's install where it is absent
# (it is only in the dev extra).
if _started_as_floodmark() or _started_as_pyspark_worker():
    _sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

# A floodmark process compiles the methods @dataclass writes once across processes rather than
# at every start (floodmark.dataclass_code: about a fifth of a broker's or a CLI command's
# start-up CPU). And it ends without the interpreter's last garbage collections: after the
# atexit handlers (this one is registered first, so it runs last) every object left is frozen
# (gc.freeze), so the collections of the interpreter's teardown do not walk them all; they were
# a fifth of a CLI command's or a broker's CPU for its whole life (0.03-0.08 s). Everything
# else of a normal exit stays: threads joined, atexit handlers, streams flushed, the modules'
# objects released; only garbage in reference cycles is no longer collected at the very end
# (Python does not promise to finalize it at exit either).
if _started_as_floodmark():
    import atexit as _atexit
    import gc as _gc

    from floodmark import dataclass_code as _dataclass_code

    _atexit.register(_gc.freeze)
    _dataclass_code.install()
