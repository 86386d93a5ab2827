"""``floodmark broker``: run a single Kafka-compatible broker (broker and controller in one
process). Bad input (an address, a data directory, a port in use, a setting) is one line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from floodmark import features
from floodmark.cli.checks import check_bindable, check_data_dir
from floodmark.cli.errors import CliError


def _add_scram(text: str) -> Any:
    from floodmark.security import parse_add_scram

    try:
        return parse_add_scram(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("broker", help="run a Kafka-compatible broker (broker+controller)")
    p.add_argument("--data-dir", required=True, help="data directory (created if missing)")
    p.add_argument("--listen", default="127.0.0.1:9092",
                   help="HOST:PORT to bind (port 0 = any; a port alone: on 127.0.0.1)")
    p.add_argument("--advertised", default=None, help="HOST:PORT clients are told to use")
    p.add_argument("--config", default=None, help="TOML file of Kafka-named settings")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="NAME=VALUE", help="any Kafka-named setting (repeatable)")
    p.add_argument("--node-id", type=int, default=None)
    p.add_argument("--add-scram", action="append", default=[], type=_add_scram,
                   metavar="MECHANISM=[name=N,password=P]",
                   help="a SCRAM user a new data directory starts with, in kafka-storage "
                        "format's syntax (SCRAM-SHA-512=[name=admin,password=admin-secret]); "
                        "repeatable; ignored once the node's metadata exists")
    features.add_feature_arguments(p)
    p.add_argument("--log-level", default=os.environ.get("FLOODMARK_LOG_LEVEL", "INFO"))
    p.set_defaults(func=run_broker)


def run_broker(args: argparse.Namespace) -> int:
    from floodmark import lifeline
    from floodmark.broker import Broker, BrokerConfig, LocalMembership

    try:  # input first: nothing is started for a level this release cannot format
        levels = features.bootstrap_features(args)
    except features.FeatureError as exc:
        print(f"floodmark broker: {exc}", file=sys.stderr)
        return 2
    lifeline.hold()  # started by a test run: end with it

    if not isinstance(logging.getLevelName(args.log_level.upper()), int):
        print(f"floodmark broker: --log-level {args.log_level!r} is not DEBUG, INFO, WARNING or "
              "ERROR", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = BrokerConfig.load(
            data_dir=args.data_dir, listen=args.listen, advertised=args.advertised,
            config_file=args.config, overrides=args.overrides, node_id=args.node_id,
        )
    except (ValueError, OSError) as exc:
        print(f"floodmark broker: {exc}", file=sys.stderr)
        return 2
    try:
        check_data_dir(config.data_dir)
        listeners = config.listeners
        for ep in listeners.listeners:
            check_bindable(ep.host or config.listen_host, ep.port,
                           f"listener {ep.name}" if listeners.explicit else "--listen")
    except CliError as exc:
        print(f"floodmark broker: {exc}", file=sys.stderr)
        return 2
    from floodmark.storage import DataDirLockedError, lock_data_dirs

    try:  # held until the process ends
        locks = lock_data_dirs([str(config.data_dir), *map(str, config.log_dirs)])
    except (DataDirLockedError, OSError) as exc:
        print(f"floodmark broker: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    try:
        broker = Broker(config, LocalMembership(config.data_dir, config.node_id,
                                                tuple(args.add_scram), rack=config.rack,
                                                bootstrap_features=levels))
        broker.open()
    except OSError as exc:
        print(f"floodmark broker: cannot open --data-dir {args.data_dir}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    except ValueError as exc:  # a partition in two log dirs, an unreadable meta.properties
        print(f"floodmark broker: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, broker.stop)

        def ready(port: int) -> None:
            # One machine-readable line on stdout so scripts and tests learn the bound port
            # (the first listener's); then one line per listener when there are several.
            first = listeners.listeners[0]
            print(f"floodmark broker listening on {first.host or config.listen_host}:{port}",
                  flush=True)
            if listeners.explicit:
                for ep in listeners.listeners:
                    print(f"floodmark broker listener {ep.name} ({ep.security_protocol.value}) "
                          f"at {ep.host or config.listen_host}:{broker.bound_ports[ep.name]}",
                          flush=True)

        await broker.serve(ready)

    try:
        asyncio.run(main())
    except OSError as exc:  # the port was taken between the check and the bind
        print(f"floodmark broker: cannot listen on {config.listen_host}:{config.listen_port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    finally:
        for lock in locks:
            lock.release()
    return 0
