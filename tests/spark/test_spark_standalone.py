"""docs/spark.md "Running on a Spark cluster", proven: a Spark standalone master and worker started
with Spark's own scripts from the pyspark package (``sbin/spark-daemon.sh``, what
``start-master.sh``/``start-worker.sh`` run), a job submitted with ``spark-submit``, its tasks in a
separate executor process, reading from and writing to a real 3-broker floodmark cluster.

The job does not call ``floodmark.spark.register``: it is submitted with ``PYSPARK_PYTHON`` naming
the executors' interpreter, as Spark's docs say, and PySpark finds the format itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from spark_helpers import produce
from standalone import SparkStandalone

from floodmark.client.fetch import FetchClient

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.timeout(600)]

SRC = Path(__file__).resolve().parents[2] / "src"


JOB = """
import json, os, sys
from pyspark.sql import SparkSession

bootstrap, source, sink = sys.argv[1:4]
spark = SparkSession.builder.appName("floodmark-standalone-test").getOrCreate()
df = (spark.read.format("floodmark").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", source).load())
rows = df.count()
(df.selectExpr("key", "value").write.format("floodmark")
   .option("kafka.bootstrap.servers", bootstrap).option("topic", sink).mode("append").save())

def where(_):
    # walk up from the Python worker to the JVM that runs it
    pid = os.getpid()
    for _ in range(6):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\\0", b" ").decode()
        if "java" in cmd.split(" ")[0]:
            return (os.getpid(), "CoarseGrainedExecutorBackend" in cmd)
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return (os.getpid(), False)

tasks = spark.sparkContext.parallelize(range(4), 4).map(where).collect()
executors = spark.sparkContext._jsc.sc().getExecutorIds().size()
print("RESULT " + json.dumps({"rows": rows, "tasks": tasks, "executors": executors,
                              "driver_pid": os.getpid(),
                              "master": spark.sparkContext.master}))
spark.stop()
"""


def test_job_on_a_standalone_cluster_reads_and_writes_a_floodmark_cluster(tmp_path: Path) -> None:
    from floodmark.cluster import LocalCluster

    cluster = LocalCluster(tmp_path / "cluster", 3).start()
    spark_cluster = SparkStandalone(tmp_path / "spark")
    try:
        bs = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        futures = admin.create_topics([NewTopic("clicks", 2, 3), NewTopic("clicks-copy", 2, 3)])
        for f in futures.values():
            f.result(30)
        produced = produce(bs, "clicks", 300, partitions=2)
        spark_cluster.start()

        job = tmp_path / "job.py"
        job.write_text(textwrap.dedent(JOB))
        env = dict(spark_cluster.env)
        env["PYTHONPATH"] = str(SRC)  # the driver's; executors get it from spark.executorEnv
        # the executors' interpreter, named in the submitting environment: PySpark's lookup of
        # pyspark_* modules and the data source it registers read PYSPARK_PYTHON from there
        # (PythonUtils.defaultPythonExec), not from spark.pyspark.python
        env["PYSPARK_PYTHON"] = sys.executable
        out = subprocess.run(
            [str(Path(sys.executable).parent / "spark-submit"), "--master", spark_cluster.url,
             "--conf", f"spark.executorEnv.PYTHONPATH={SRC}",
             "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
             str(job), bs, "clicks", "clicks-copy"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        (tmp_path / "job.out").write_text(out.stdout + "\n----- stderr\n" + out.stderr)
        errors = [x for x in (out.stdout + out.stderr).splitlines()
                  if ("Error" in x or "Exception" in x) and not x.lstrip().startswith("at ")]
        assert out.returncode == 0 and line is not None, "\n".join(errors[:15])
        result = json.loads(line[len("RESULT "):])
        assert result["master"] == spark_cluster.url
        assert result["rows"] == 300
        assert result["executors"] >= 1  # executor processes registered with the driver
        for pid, in_executor in result["tasks"]:
            assert in_executor, f"task ran in python {pid}, not under an executor JVM"
            assert pid != result["driver_pid"]

        client = FetchClient(bs)
        written = sum(client.bounds("clicks-copy", p).high_watermark for p in (0, 1))
        client.close()
        assert written == len(produced) == 300
    finally:
        spark_cluster.stop()
        cluster.stop()
