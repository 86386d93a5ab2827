"""``python -m tests.reference.differential [--report FILE] [--kafka B --floodmark B]
[--scenario NAME ...]``: run the scenarios, print the report (and write it to FILE). Without
bootstraps it starts one Kafka node and one floodmark broker in a temporary directory."""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from tests.conftest import BrokerProcess
from tests.reference.conftest import INTERNAL_PARTITIONS
from tests.reference.differential.report import render
from tests.reference.differential.runner import run_all
from tests.reference.kafka_node import kafka_cluster, kafka_version


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.reference.differential")
    p.add_argument("--report", type=Path, help="also write the report to this file")
    p.add_argument("--kafka", help="a running Kafka's bootstrap (else one is started)")
    p.add_argument("--floodmark", help="a running floodmark's bootstrap (else one is started)")
    p.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    args = p.parse_args(argv)
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="differential-")))
        kafka = args.kafka or stack.enter_context(
            kafka_cluster(tmp / "kafka", 1, INTERNAL_PARTITIONS)).bootstrap
        floodmark = args.floodmark
        if floodmark is None:
            broker = BrokerProcess(tmp / "floodmark").start()
            stack.callback(broker.stop)
            floodmark = broker.bootstrap
        outcomes = run_all(kafka, floodmark, args.scenario)
    text = render(outcomes, kafka_label=f"Kafka {kafka_version()}")
    print(text, end="")
    if args.report:
        args.report.write_text(text)
    return 1 if any(o.unexplained() for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
