"""PySpark's automatic discovery of the ``floodmark`` data source.

When a session first resolves a Python data source, PySpark (>= 4.0) imports every top-level
module whose name starts with ``pyspark_`` in the workers' interpreter and registers the
``DefaultSource`` it finds under ``DefaultSource.name()`` (pyspark/sql/worker/lookup_data_sources.py).
Installing floodmark with its ``[spark]`` extra is therefore enough for
``spark.read.format("floodmark")``; ``floodmark.spark.register(spark)`` is only needed where that
lookup does not run (Spark Connect clients, a workers' interpreter without floodmark).

The import is guarded: an interpreter without pyarrow/numpy must not break the lookup of every
other data source, so it then offers no ``DefaultSource`` and PySpark skips this module.
"""

from __future__ import annotations

try:
    from floodmark.spark.source import FloodmarkDataSource as DefaultSource
except ImportError:  # pragma: no cover - only in an interpreter without the [spark] extra
    pass
else:
    __all__ = ["DefaultSource"]
