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


# kio registers Hypothesis strategies for its types whenever Hypothesis is importable (it is in
# a development install): about a quarter of a broker's or a CLI command's start-up CPU, and
# the test suite starts a great many of them. floodmark's own code never imports Hypothesis, so a
# floodmark process hides it, as in a user's install where it is absent.
if _started_as_floodmark():
    _sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
