"""Spark's own JVM Kafka connector (``spark.read.format("kafka")``) as jars from Maven Central.

``tools/spark-kafka/pom.xml`` pins the connector (``org.apache.spark:spark-sql-kafka-0-10_2.13``);
``jars`` copies it and its runtime dependencies (kafka-clients, spark-token-provider-kafka,
commons-pool2) into ``tools/spark-kafka/lib`` (git-ignored) with the same Maven fetcher as the
real Kafka's jars (``kafka_node.fetch_maven_jars``), once per pom. Spark itself comes from the
PySpark installation; a SparkSession gets the connector with ``spark.jars`` set to ``jars()``.

Command line (from the repo root):
    python -m tests.reference.spark_kafka fetch     # prints the jars and the versions
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tests.reference.kafka_node import KafkaUnavailable, _jars_current, fetch_maven_jars

REPO = Path(__file__).resolve().parents[2]
SPARK_KAFKA_DIR = REPO / "tools" / "spark-kafka"
POM = SPARK_KAFKA_DIR / "pom.xml"
LIB = SPARK_KAFKA_DIR / "lib"


def connector_version() -> str:
    """The Spark release of the connector the pom pins."""
    text = POM.read_text()
    start = text.index("<spark.version>") + len("<spark.version>")
    return text[start:text.index("</spark.version>")]


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def missing_reason() -> str | None:
    """Why Spark's JVM connector cannot run here (one line), or None."""
    if shutil.which("java") is None:
        return "Spark's JVM Kafka connector needs `java` on PATH (Java 17)"
    if shutil.which("mvn") is None and not _jars_current(POM, LIB):
        return "fetching Spark's JVM Kafka connector needs `mvn` on PATH (Maven)"
    return None


def jars(*, quiet: bool = True) -> list[Path]:
    """The connector's jars (fetched on first use), for ``spark.jars``."""
    fetch_maven_jars(POM, LIB, quiet=quiet)
    found = sorted(LIB.glob("*.jar"))
    if not any(p.name.startswith("spark-sql-kafka-0-10_") for p in found):
        raise KafkaUnavailable(f"no spark-sql-kafka jar in {LIB}")
    return found


def version_note() -> str:
    """One line: the connector's Spark release against the installed PySpark's."""
    connector, installed = connector_version(), pyspark_version()
    if connector == installed:
        return f"spark-sql-kafka {connector} = PySpark {installed}"
    return (f"spark-sql-kafka {connector} on PySpark {installed} (Maven Central serves no "
            f"{installed} connector; tools/spark-kafka/pom.xml says why)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.reference.spark_kafka",
                                 description="Spark's JVM Kafka connector jars")
    ap.add_argument("command", choices=["fetch"])
    ap.parse_args(argv)
    try:
        found = jars(quiet=False)
    except KafkaUnavailable as e:
        print(f"spark-kafka: {e}", file=sys.stderr)
        return 1
    for p in found:
        print(p)
    print(version_note())
    return 0


if __name__ == "__main__":
    sys.exit(main())
