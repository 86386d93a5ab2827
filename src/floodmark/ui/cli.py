"""``floodmark ui --bootstrap HOST:PORT[,..] | --data-dir DIR [--listen 127.0.0.1:8080]
[--allow-changes]``."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import signal
import sys
from typing import Any

from floodmark.address import BadAddress
from floodmark.ui.access import Access, read_password, tls_context
from floodmark.ui.server import Dashboard, bind, serve
from floodmark.ui.source import BootstrapSource, LocalClusterSource, Source


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ui", help="live dashboard: each replica's log, HW, LEO, ISR, "
                                         "epochs (web page + JSON API)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", help="HOST:PORT[,HOST:PORT...] of any cluster's brokers")
    where.add_argument("--data-dir", help="a local cluster's directory (`floodmark cluster up "
                                          "--data-dir`): adds controller and process states")
    p.add_argument("--listen", default="127.0.0.1:8080",
                   help="HOST:PORT to serve on (port 0: any free port; default %(default)s)")
    p.add_argument("--interval-ms", type=int, default=500,
                   help="refresh period while the view changes; doubles while nothing "
                        "changes, up to 8 times (default %(default)s)")
    p.add_argument("--metrics", default="", metavar="URL[,URL...]",
                   help="with --bootstrap: the brokers' Prometheus endpoints "
                        "(http://HOST:PORT/metrics), for each topic's bytes/s in and out "
                        "(--data-dir finds them itself)")
    p.add_argument("--allow-changes", action="store_true",
                   help="serve the buttons that change the cluster: create and delete topics, "
                        "reset consumer group offsets, fault drills (each asks to confirm; "
                        "without this flag they are hidden and their API answers 403)")
    p.add_argument("--tls-cert", metavar="FILE", default=None,
                   help="serve HTTPS with this PEM certificate (chain) (with --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", default=None, help="its PEM private key")
    p.add_argument("--password-file", metavar="FILE", default=None,
                   help="ask every request for HTTP Basic credentials: --user and the file's "
                        "first line (needs --tls-cert unless the dashboard listens on loopback)")
    p.add_argument("--user", default="floodmark", help="the user name (default %(default)s)")
    p.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    source: Source
    try:
        metrics = tuple(u.strip() for u in args.metrics.split(",") if u.strip())
        if metrics and not args.bootstrap:
            raise ValueError("--metrics goes with --bootstrap (--data-dir finds the "
                             "brokers' endpoints itself)")
        if bad := [u for u in metrics if not u.startswith(("http://", "https://"))]:
            raise ValueError(f"--metrics {bad[0]!r} is not an http:// URL")
        source = (BootstrapSource(args.bootstrap, metrics) if args.bootstrap
                  else LocalClusterSource(args.data_dir))
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        tls = None
        if (args.tls_cert is None) != (args.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together")
        if args.tls_cert is not None:
            tls = tls_context(args.tls_cert, args.tls_key)
        access = Access(args.user, None if args.password_file is None
                        else read_password(args.password_file))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        sock = bind(args.listen)
    except BadAddress as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    if access.password is not None and tls is None and not _loopback(host):
        sock.close()
        print(f"error: --password-file on {host} without --tls-cert would send the password in "
              "the clear: add --tls-cert/--tls-key or listen on loopback", file=sys.stderr)
        return 1
    scheme = "https" if tls is not None else "http"

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        dashboard = Dashboard(source, args.interval_ms, args.allow_changes)
        await serve(dashboard, sock, stop, lambda: print(
            f"floodmark ui listening on {scheme}://{host}:{port}/", flush=True),
            tls=tls, access=access)

    asyncio.run(run())
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
