"""``python -m floodmark.controller``: run the controller process (``floodmark cluster up`` does).

The controller's options, settings and startup live in ``controller/startup.py``, shared with
combined mode (``broker/cluster_member.py --controller-data-dir``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from floodmark import lifeline
from floodmark.address import BadAddress, format_host_port, parse_host_port
from floodmark.controller.startup import (
    add_controller_arguments,
    controller_setup,
    open_controller,
    start_controller,
)
from floodmark.metrics_flags import add_metrics_security_arguments, metrics_security
from floodmark.storage import DataDirLockedError

LISTEN_DEFAULT = "127.0.0.1:0"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="floodmark-controller")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--listen", default=None, metavar="HOST:PORT",
                   help=f"where to listen (default: this node's entry of "
                        f"controller.quorum.voters, else {LISTEN_DEFAULT}); a controller "
                        "outside that list is an observer until AddRaftVoter (KIP-853)")
    p.add_argument("--node-id", type=int, default=0)
    p.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help="serve Prometheus /metrics here (port 0: any free port)")
    add_metrics_security_arguments(p)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="a Kafka-named setting: controller.listener.names, "
                        "listener.security.protocol.map, ssl.* (the controller channel's TLS)")
    add_controller_arguments(p)
    p.add_argument("--log-level", default=os.environ.get("FLOODMARK_LOG_LEVEL", "INFO"))
    args = p.parse_args(argv)
    lifeline.hold()  # started by a test run or a benchmark: end with it
    try:
        settings: dict[str, str] = {}
        for item in args.overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"--set expects name=value, got {item.split('=')[0]!r}")
            settings[name.strip()] = value.strip()
        setup = controller_setup(args, args.node_id, settings.get,
                                 observer=args.listen is not None)
        if args.listen is None:
            args.listen = (LISTEN_DEFAULT if setup.own_address is None
                           else format_host_port(*setup.own_address))  # where the others call
        parse_host_port(args.listen, what="--listen")
        if args.metrics_listen:
            parse_host_port(args.metrics_listen, what="--metrics-listen")
        metrics_keystore, metrics_password = metrics_security(args)
    except (BadAddress, ValueError) as exc:
        print(f"floodmark controller: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server, lock = open_controller(setup, args.data_dir)
    except (DataDirLockedError, OSError, ValueError) as exc:  # ValueError: an unreadable
        # quorum-state or meta.properties (refused rather than started without it)
        print(f"floodmark controller: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        if args.metrics_listen:
            from floodmark.controller.metrics import ControllerCollector
            from floodmark.metrics import serve_metrics

            mhost, mport = serve_metrics([ControllerCollector(server)], args.metrics_listen,
                                         keystore=metrics_keystore, password=metrics_password)
            scheme = "https" if metrics_keystore else "http"
            print(f"floodmark controller {args.node_id} metrics on {scheme}://{mhost}:{mport}"
                  "/metrics", flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stop)
        task, _ = await start_controller(server, args.listen)
        await task

    asyncio.run(run())
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
