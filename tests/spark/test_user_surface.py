"""What a Spark user touches first (issue 12): the format found without registering it, option
mistakes as one line at load(), kafka.group.id accepted, Overwrite refused like Spark's Kafka
sink. Real SparkSessions against a real floodmark broker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from spark_helpers import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SRC = Path(__file__).resolve().parents[2] / "src"


def _one_line_error(exc: BaseException, needle: str) -> None:
    """PySpark's wrapper (error class, our message, SQLSTATE) and nothing else: no frames."""
    text = str(exc)
    assert needle in text, text
    assert "Traceback" not in text and 'File "' not in text, text
    assert len(text.strip().splitlines()) <= 2, text


def test_format_is_found_without_register_or_pyspark_python(broker, topic_name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fresh interpreter as a user runs it in an activated venv: no floodmark import, no
    register(), no PYSPARK_PYTHON. PySpark's lookup of ``pyspark_*`` modules finds the source."""
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 40, partitions=2)
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        df = (spark.read.format("floodmark").option("kafka.bootstrap.servers", "{broker.bootstrap}")
              .option("subscribe", "{topic_name}").load())
        print("COUNT", df.count())
        spark.stop()
    """))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(SRC)  # the package under test, as an installed floodmark would be
    out = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert "COUNT 40" in out.stdout, out.stdout + out.stderr[-3000:]


@pytest.mark.parametrize(("options", "needle"), [
    ({"maxOffsetsPerTrigger": "abc"}, "maxOffsetsPerTrigger must be an integer"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be at least 1"),
    ({"startingOffsets": "[1,2]"}, "startingOffsets must be"),
    ({"startingOffsets": '{"t":{"0":-7}}'}, "offset -7"),
    ({"startingOffsets": '{"t":[0,1]}'}, "startingOffsets must be"),
    ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset' is not supported"),
    ({"kafka.bootstrap.servers": "localhost"}, "is not host:port"),
    ({"kafka.request.timeout.ms": "soon"}, "kafka.request.timeout.ms must be an integer"),
    ({"kafka.isolation.level": "serializable"}, "kafka.isolation.level must be"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
    ({"subscribe": None, "assign": "t"}, "assign must be JSON"),
    ({"subscribe": None, "subscribePattern": "("}, "is not a regular expression"),
])
def test_option_mistakes_fail_load_with_one_line(spark, options, needle) -> None:  # type: ignore[no-untyped-def]
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", **options}
    for reader in (spark.read, spark.readStream):
        r = reader.format("floodmark")
        for k, v in opts.items():
            if v is not None:
                r = r.option(k, v)
        with pytest.raises(Exception) as info:
            r.load()  # checked at load(): no query needed, no broker asked
        _one_line_error(info.value, needle)


def test_stream_only_and_batch_only_rules_are_one_line(spark) -> None:  # type: ignore[no-untyped-def]
    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    with pytest.raises(Exception) as info:
        spark.read.format("floodmark").options(**base, startingOffsets="latest").load().count()
    _one_line_error(info.value, "startingOffsets='latest' is not allowed for a batch query")

    q = (spark.readStream.format("floodmark").options(**base, endingOffsets="latest").load()
         .writeStream.format("noop").start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    # the query's own error: pyspark's UnboundLocalError must not hide the message
    assert "ending offsets are not allowed for a streaming query" in str(info.value)
    assert "UnboundLocalError" not in str(info.value) and "Traceback" not in str(info.value)


def test_an_unreachable_bootstrap_is_one_line_with_a_hint(spark) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: nobody at kafka.bootstrap.servers (port 9 refuses) fails the action, and the
    stream's start, with one line saying what to check, not a Python traceback."""
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    with pytest.raises(Exception) as info:
        spark.read.format("floodmark").options(**opts).load().count()
    _one_line_error(info.value, "no broker answered")
    assert "is the cluster up, and is kafka.bootstrap.servers its address?" in str(info.value)

    q = spark.readStream.format("floodmark").options(**opts).load().writeStream.format(
        "noop").start()
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    assert "no broker answered" in str(info.value) and "Traceback" not in str(info.value)


def test_kafka_group_id_is_accepted_like_spark(spark, broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, 5, partitions=1)
    df = (spark.read.format("floodmark").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name).option("kafka.group.id", "analytics")
          .option("groupIdPrefix", "spark-kafka-source").load())
    assert df.count() == 5


def test_overwrite_is_refused_like_sparks_kafka_sink(spark, broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception) as info:
        (df.write.format("floodmark").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic_name).mode("overwrite").save())
    _one_line_error(info.value, "save mode Overwrite is not allowed")
    back = (spark.read.format("floodmark").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name).load())
    assert back.count() == 0  # refused before a record was written
