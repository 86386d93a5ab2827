"""The Spark source and sink over SASL_SSL (issue 21): ``kafka.security.protocol``,
``kafka.ssl.*`` and ``kafka.sasl.*`` pass through to floodmark's client, as Spark's Kafka source
passes them to its consumers. A real SparkSession writes and reads a topic of one floodmark
broker whose only listener is SASL_SSL with SCRAM-SHA-512; a wrong password fails the query
with one line that does not show the password."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tests.conftest import BrokerProcess

from floodmark.security.certs import issue_files, load_or_make_ca

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

USER, PASSWORD = "spark-user", "spark-secret"


class SecuredBroker:
    def __init__(self, process: BrokerProcess, ca: Path) -> None:
        self.process, self.ca = process, ca

    def options(self, password: str = PASSWORD) -> dict[str, str]:
        """The Spark options a user sets (librdkafka's names; the Java client's work too)."""
        return {"kafka.bootstrap.servers": self.process.bootstrap,
                "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{USER}" password="{password}";',
                "kafka.ssl.ca.location": str(self.ca)}

    def confluent(self) -> dict[str, str]:
        return {"bootstrap.servers": self.process.bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
                "sasl.password": PASSWORD, "ssl.ca.location": str(self.ca)}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    tmp = tmp_path_factory.mktemp("spark-sasl-ssl")
    ca, ca_path = load_or_make_ca(tmp / "tls")
    node = issue_files(tmp / "tls", "broker", ca, ("127.0.0.1", "localhost"))
    process = BrokerProcess(tmp / "data", [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_SSL",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={node.keystore}",
        "--add-scram", f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]",
    ]).start()
    try:
        yield SecuredBroker(process, ca_path)
    finally:
        process.stop()


def test_spark_writes_and_reads_over_sasl_ssl(spark, secured: SecuredBroker) -> None:  # type: ignore[no-untyped-def]
    topic = f"sealed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(secured.confluent())
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    del admin
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (spark.createDataFrame(rows, "key string, value string").write.format("floodmark")
     .options(**secured.options()).option("topic", topic).mode("append").save())
    df = (spark.read.format("floodmark").options(**secured.options())
          .option("subscribe", topic).load())
    got = sorted((bytes(r.key).decode(), bytes(r.value).decode())
                 for r in df.select("key", "value").collect())
    assert got == sorted(rows)


def test_a_wrong_password_fails_with_one_line_without_it(spark, secured: SecuredBroker) -> None:  # type: ignore[no-untyped-def]
    wrong = "not-the-password-42"
    with pytest.raises(Exception) as err:
        (spark.read.format("floodmark").options(**secured.options(wrong))
         .option("subscribe", "anything").load().count())
    text = str(err.value)
    assert "SASL_AUTHENTICATION_FAILED" in text or "authentication" in text.lower(), text[-2000:]
    assert wrong not in text
