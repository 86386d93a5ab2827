"""``floodmark user scram set|list|delete``: SCRAM credentials (kafka-configs.sh
``--entity-type users --alter --add-config 'SCRAM-SHA-512=[password=...]'``'s job), over
AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554).

The password is salted here, with a fresh random salt: the broker receives the salted password
only (``--password -`` reads it from standard input, out of the process list)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect, report
from floodmark.security import (
    DEFAULT_ITERATIONS,
    ScramMechanism,
    check_iterations,
    new_salt,
    salted_password,
)

DESCRIBE = 50
ALTER = 51


def _mechanism(text: str) -> ScramMechanism:
    try:
        return ScramMechanism.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: Any) -> None:
    user = subparsers.add_parser("user", help="users' SCRAM credentials")
    usub = user.add_subparsers(dest="user_command", metavar="KIND")
    scram = usub.add_parser("scram", help="set, list or delete SCRAM credentials")
    ssub = scram.add_subparsers(dest="scram_command", metavar="ACTION")
    p = ssub.add_parser("set", help="create or replace a user's credential for one mechanism")
    p.add_argument("name")
    p.add_argument("--password", required=True, help="the password ('-': read a line from "
                                                     "standard input)")
    p.add_argument("--mechanism", type=_mechanism, default=ScramMechanism.SCRAM_SHA_512,
                   metavar="SCRAM-SHA-256|SCRAM-SHA-512")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"4096 to 16384 (default {DEFAULT_ITERATIONS})")
    add_bootstrap(p)
    p.set_defaults(func=scram_set)
    p = ssub.add_parser("list", help="users with SCRAM credentials, their mechanisms and "
                                     "iterations")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--json", action="store_true",
                   help='[{"user", "credentials": [{"mechanism", "iterations"}]}, ...]')
    add_bootstrap(p)
    p.set_defaults(func=scram_list)
    p = ssub.add_parser("delete", help="delete a user's credential for one mechanism")
    p.add_argument("name")
    p.add_argument("--mechanism", type=_mechanism, required=True,
                   metavar="SCRAM-SHA-256|SCRAM-SHA-512")
    add_bootstrap(p)
    p.set_defaults(func=scram_delete)
    scram.set_defaults(func=lambda a: (scram.print_help(), 2)[1])
    user.set_defaults(func=lambda a: (user.print_help(), 2)[1])


def scram_set(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\n") if args.password == "-" else args.password
    if not password:
        raise CliError("--password is empty")
    try:
        check_iterations(args.iterations)
        salt = new_salt()
        salted = salted_password(args.mechanism, password, salt, args.iterations)
    except ValueError as exc:
        raise CliError(f"--iterations/--password: {exc}") from None
    body = {"deletions": [], "upsertions": [{
        "name": args.name, "mechanism": int(args.mechanism), "iterations": args.iterations,
        "salt": salt, "salted_password": salted}]}
    return _alter(args, body, f"set {args.mechanism.mechanism_name} credential of user "
                              f"{args.name}")


def scram_delete(args: argparse.Namespace) -> int:
    body = {"deletions": [{"name": args.name, "mechanism": int(args.mechanism)}],
            "upsertions": []}
    return _alter(args, body, f"deleted {args.mechanism.mechanism_name} credential of user "
                              f"{args.name}")


def _alter(args: argparse.Namespace, body: dict[str, Any], done: str) -> int:
    with connect(args) as cluster:
        answer = cluster.request_any(ALTER, 0, body)
    code = report([(str(r.user), int(r.error_code), r.error_message) for r in answer.results])
    if code == 0:
        print(done)
    return code


def scram_list(args: argparse.Namespace) -> int:
    body = {"users": [{"name": n} for n in args.names] if args.names else None}
    with connect(args) as cluster:
        answer = cluster.request_any(DESCRIBE, 0, body)
    if int(answer.error_code):
        return report([("describe", int(answer.error_code), answer.error_message)])
    failed = report([(str(r.user), int(r.error_code), r.error_message) for r in answer.results])
    users: list[dict[str, Any]] = [{"user": str(r.user), "credentials": [
        {"mechanism": ScramMechanism(int(c.mechanism)).mechanism_name,
         "iterations": int(c.iterations)} for c in r.credential_infos]}
        for r in answer.results if int(r.error_code) == 0]
    if args.json:
        print(json.dumps(users))
    else:
        for u in users:
            creds = ", ".join(f"{c['mechanism']} (iterations={c['iterations']})"
                              for c in u["credentials"])
            print(f"{u['user']}: {creds}")
    return failed
