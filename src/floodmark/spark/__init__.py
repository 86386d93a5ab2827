"""PySpark data source ``floodmark``: Spark's Kafka source and sink, over the Kafka protocol.

    df = (spark.readStream.format("floodmark")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

PySpark finds the format by itself (the ``pyspark_floodmark`` module); ``register(spark)`` is for
sessions where that lookup does not run. Same schema and option names as Spark's Kafka connector;
see docs/spark.md. Nothing here imports
pyspark at module import time, so ``import floodmark.spark`` is cheap and side-effect free.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

FORMAT = "floodmark"


def register(spark: Any) -> None:
    """Register the ``floodmark`` format on a SparkSession explicitly: only needed where PySpark's
    own lookup of ``pyspark_*`` modules does not see floodmark (Spark Connect, workers running an
    interpreter without it)."""
    from floodmark.spark.source import FloodmarkDataSource

    spark.dataSource.register(FloodmarkDataSource)
    try:
        python_exec = spark.sparkContext.pythonExec
    except Exception:  # Spark Connect sessions have no sparkContext
        return
    if os.path.realpath(python_exec or "") != os.path.realpath(sys.executable) and \
            "PYSPARK_PYTHON" not in os.environ:
        log.warning("Spark workers run %r, not this interpreter %r; set PYSPARK_PYTHON=%s before "
                    "creating the session so workers can import floodmark and pyarrow",
                    python_exec, sys.executable, sys.executable)


def prepare_environment() -> None:
    """Point PySpark workers at this interpreter, and let the Python processes Spark starts import
    PySpark compiled from this interpreter's site-packages rather than from the pip package's
    pyspark.zip (``spark_home.use_compiled_pyspark``: a 3x cheaper start, which keeps the stream
    reader's driver process inside Spark's 10 s connect-back on a loaded machine). Call it before
    creating the SparkSession."""
    from floodmark.spark.spark_home import use_compiled_pyspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    use_compiled_pyspark()


def batch_session(master: str, app_name: str) -> Any:
    """A quiet SparkSession on ``master`` for batch work (no UI, no console progress, ERROR
    logs), its workers running this interpreter: the simulator's and the model checker's runs
    spread over Spark tasks."""
    from pyspark.sql import SparkSession

    prepare_environment()
    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


__all__ = ["FORMAT", "batch_session", "prepare_environment", "register"]
