"""Java options for the JVMs the tests start (real Kafka's nodes and tools, Spark's driver).

A test's JVM lives seconds to minutes and runs little hot code: most of its CPU goes to the
optimizing JIT compiler (C2) and the parallel garbage collector's threads, which pay off only in
long runs. ``-XX:TieredStopAtLevel=1`` keeps the quick compiler (C1) only and
``-XX:+UseSerialGC`` collects on the application's thread: the same programs, about half the CPU
to start one (a Kafka tool: 2.6 s -> 1.4 s of CPU). Neither changes what a program does.
"""

from __future__ import annotations

import os

SHORT_RUN_JVM_OPTS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


# Spark's driver JVM (local mode: the executors too) is started by PySpark through
# spark-submit, whichever test asks first for a session (tests/spark's fixture, the simulator's
# Spark runs): its options go in PYSPARK_SUBMIT_ARGS, read when the JVM starts. spark-submit
# itself first runs a small launcher JVM, which reads SPARK_LAUNCHER_OPTS.
_SUBMIT_ARGS_ENV = "PYSPARK_SUBMIT_ARGS"
_ours: list[str] = []  # the PYSPARK_SUBMIT_ARGS this module set (a user's own is left alone)


def spark_submit_args(jars: list[str] | None = None) -> str:
    opts = " ".join(SHORT_RUN_JVM_OPTS)
    jars_arg = f"--jars {','.join(jars)} " if jars else ""
    return f'{jars_arg}--driver-java-options "{opts}" pyspark-shell'


def set_spark_env(environ: dict[str, str] | os._Environ[str], jars: list[str] | None = None,
                  ) -> None:
    """Spark's JVMs for this test run start with SHORT_RUN_JVM_OPTS (and ``jars`` on the
    driver's classpath), unless the environment already says how to start them."""
    environ.setdefault("SPARK_LAUNCHER_OPTS", " ".join(SHORT_RUN_JVM_OPTS))
    current = environ.get(_SUBMIT_ARGS_ENV)
    if current is None or (_ours and current == _ours[-1]):
        environ[_SUBMIT_ARGS_ENV] = spark_submit_args(jars)
        _ours.append(environ[_SUBMIT_ARGS_ENV])
