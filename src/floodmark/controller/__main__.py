"""``python -m floodmark.controller``: run the controller process (``floodmark cluster up`` does)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from floodmark.address import BadAddress, format_host_port, parse_host_port
from floodmark.controller.logic import ControllerConfig, elr_config
from floodmark.controller.metadata_log import MetadataLogConfig
from floodmark.controller.quorum.codec import parse_voters
from floodmark.controller.quorum.core import QuorumConfig
from floodmark.controller.server import ControllerServer
from floodmark.settings import DEFAULTS, SETTINGS, eligible_leader_replicas_enabled
from floodmark.storage.data_dir import DataDirLockedError, lock_data_dir

LISTEN_DEFAULT = "127.0.0.1:0"
FETCH_IDLE_BACKOFF_MS = 0  # the leader long-polls caught-up voters (quorum_node)


def _bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _elr_version(text: str) -> int:
    try:
        eligible_leader_replicas_enabled(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return int(SETTINGS["eligible.leader.replicas.version"].parse(text))


def _min_isr(text: str) -> int:
    try:
        value = int(SETTINGS["min.insync.replicas"].parse(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"Invalid value {text} for configuration "
                                         f"min.insync.replicas: Value must be at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="floodmark-controller")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--listen", default=LISTEN_DEFAULT)
    p.add_argument("--node-id", type=int, default=0)
    p.add_argument("--broker-session-timeout-ms", type=int, default=9000)
    p.add_argument("--unclean-leader-election-enable", type=_bool, default=False)
    p.add_argument("--auto-leader-rebalance-enable", type=_bool, default=True)
    p.add_argument("--leader-imbalance-check-interval-ms", type=int, default=10_000)
    p.add_argument("--eligible-leader-replicas-version", type=_elr_version,
                   default=DEFAULTS["eligible.leader.replicas.version"], metavar="0|1",
                   help="KIP-966 eligible leader replicas and the unclean-shutdown rule: 1 on "
                        "(the default, as Kafka 4.1+ for new clusters), 0 off")
    p.add_argument("--min-insync-replicas", type=_min_isr,
                   default=DEFAULTS["min.insync.replicas"],
                   help="the cluster's min.insync.replicas (the brokers' setting; topics may "
                        "override it): the ISR size below which leavers join the ELR")
    p.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help="serve Prometheus /metrics here (port 0: any free port)")
    p.add_argument("--controller-quorum-voters", default=None, metavar="ID@HOST:PORT,...",
                   help="Kafka's controller.quorum.voters: run as one voter of this quorum "
                        "(--node-id must be one of them; one voter is valid)")
    p.add_argument("--controller-quorum-election-timeout-ms", type=int, default=1000)
    p.add_argument("--controller-quorum-fetch-timeout-ms", type=int, default=2000)
    p.add_argument("--controller-quorum-election-backoff-max-ms", type=int, default=1000)
    p.add_argument("--controller-quorum-request-timeout-ms", type=int, default=2000)
    defaults = MetadataLogConfig()
    p.add_argument("--metadata-log-segment-bytes", type=int, default=defaults.segment_bytes)
    p.add_argument("--metadata-log-max-record-bytes-between-snapshots", type=int,
                   default=defaults.max_record_bytes_between_snapshots,
                   help="snapshot the metadata image after this many committed record bytes "
                        "(KIP-630; 0: never)")
    p.add_argument("--log-level", default=os.environ.get("FLOODMARK_LOG_LEVEL", "INFO"))
    args = p.parse_args(argv)
    quorum: tuple[QuorumConfig, dict[int, tuple[str, int]]] | None = None
    if args.controller_quorum_voters:
        try:
            voters = parse_voters(args.controller_quorum_voters)
            quorum = (QuorumConfig(
                args.node_id, tuple(sorted(voters)),
                election_timeout_ms=args.controller_quorum_election_timeout_ms,
                fetch_timeout_ms=args.controller_quorum_fetch_timeout_ms,
                election_backoff_max_ms=args.controller_quorum_election_backoff_max_ms,
                request_timeout_ms=args.controller_quorum_request_timeout_ms,
                fetch_idle_backoff_ms=FETCH_IDLE_BACKOFF_MS), voters)
        except ValueError as exc:
            print(f"floodmark controller: {exc}", file=sys.stderr)
            return 2
        if args.listen == LISTEN_DEFAULT:  # listen where the other voters will call
            host, port = voters[args.node_id]
            args.listen = format_host_port(host, port)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        host, port = parse_host_port(args.listen, what="--listen")
        if args.metrics_listen:
            parse_host_port(args.metrics_listen, what="--metrics-listen")
    except BadAddress as exc:
        print(f"floodmark controller: {exc}", file=sys.stderr)
        return 2
    try:
        lock = lock_data_dir(args.data_dir)  # held until the process ends
    except (DataDirLockedError, OSError) as exc:
        print(f"floodmark controller: {exc}", file=sys.stderr)
        return 2
    config = ControllerConfig(
        broker_session_timeout_ms=args.broker_session_timeout_ms,
        unclean_leader_election_enable=args.unclean_leader_election_enable,
        auto_leader_rebalance_enable=args.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_ms=args.leader_imbalance_check_interval_ms,
        **elr_config(bool(args.eligible_leader_replicas_version), args.min_insync_replicas),
    )
    if args.metadata_log_segment_bytes < 1024 or args.metadata_log_max_record_bytes_between_snapshots < 0:
        print("floodmark controller: --metadata-log-segment-bytes must be at least 1024 and "
              "--metadata-log-max-record-bytes-between-snapshots not negative", file=sys.stderr)
        return 2
    mlog_config = MetadataLogConfig(args.metadata_log_segment_bytes,
                                    args.metadata_log_max_record_bytes_between_snapshots)

    async def run() -> None:
        server = ControllerServer(args.data_dir, config, args.node_id, quorum, mlog_config)
        if args.metrics_listen:
            from floodmark.controller.metrics import ControllerCollector
            from floodmark.metrics import serve_metrics

            mhost, mport = serve_metrics([ControllerCollector(server)], args.metrics_listen)
            print(f"floodmark controller {args.node_id} metrics on http://{mhost}:{mport}"
                  "/metrics", flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stop)

        def ready(bound: int) -> None:
            print(f"floodmark controller listening on {format_host_port(host, bound)}",
                  flush=True)

        await server.serve(host, port, ready)

    asyncio.run(run())
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
