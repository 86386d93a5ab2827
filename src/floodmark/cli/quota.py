"""``floodmark quota set|list|remove``: client quotas in kafka-configs.sh's vocabulary, through
AlterClientQuotas / DescribeClientQuotas.

The entity: ``--user NAME`` or ``--user-default``, ``--client-id ID`` or ``--client-default``,
or one of each for a (user, client id) pair. Until TLS/SASL authenticate a connection its user
is ``ANONYMOUS`` (``--user ANONYMOUS``). ``set`` takes ``--producer-byte-rate``,
``--consumer-byte-rate``, ``--request-percentage``, ``--controller-mutation-rate`` and/or
kafka-configs' ``--add-config 'producer_byte_rate=1024,consumer_byte_rate=2048'``. ``remove``
removes ``--delete-config KEY`` (repeatable), or every quota of the entity without one.
``list`` shows the quotas of the entity named (``--strict``: that entity only, not the pairs it
is part of), every quota without one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    connect,
)
from floodmark.client import error_text
from floodmark.security import (
    CLIENT_ID,
    USER,
    MatchType,
    QuotaError,
    QuotaType,
    new_alteration,
)

API_DESCRIBE_CLIENT_QUOTAS, API_ALTER_CLIENT_QUOTAS = 48, 49
VERSION = 1
_RATE_FLAGS = {
    "producer_byte_rate": "--producer-byte-rate",
    "consumer_byte_rate": "--consumer-byte-rate",
    "request_percentage": "--request-percentage",
    "controller_mutation_rate": "--controller-mutation-rate",
}


def register(subparsers: Any) -> None:
    quota = subparsers.add_parser("quota", help="set, list, remove client quotas "
                                  "(kafka-configs.sh --entity-type users/clients)")
    qsub = quota.add_subparsers(dest="quota_command", metavar="ACTION")
    for name, func, help_text in (("set", quota_set, "set quotas of a user and/or client id"),
                                  ("list", quota_list, "list quotas"),
                                  ("remove", quota_remove, "remove quotas")):
        p = qsub.add_parser(name, help=help_text)
        user = p.add_mutually_exclusive_group()
        user.add_argument("--user", default=None, metavar="NAME",
                          help="a principal's name (ANONYMOUS without authentication)")
        user.add_argument("--user-default", action="store_true",
                          help="the default of every user without its own quota")
        client = p.add_mutually_exclusive_group()
        client.add_argument("--client-id", default=None, metavar="ID")
        client.add_argument("--client-default", action="store_true",
                            help="the default of every client id without its own quota")
        if name == "set":
            for key, flag in _RATE_FLAGS.items():
                p.add_argument(flag, type=float, default=None, dest=key, metavar="N")
            p.add_argument("--add-config", action="append", default=[], metavar="K=V,...",
                           help="kafka-configs' form: producer_byte_rate=1024,...")
            p.add_argument("--validate-only", action="store_true",
                           help="check with the broker, change nothing")
        elif name == "remove":
            p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                           help="a quota key to remove (default: every quota of the entity)")
        else:
            p.add_argument("--strict", action="store_true",
                           help="only the entity named, not the (user, client id) pairs "
                                "it is part of")
        add_bootstrap(p)
        p.set_defaults(func=func)
    quota.set_defaults(func=lambda a: (quota.print_help(), 2)[1])


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        out.append((USER, None if args.user_default else args.user))
    if args.client_id is not None or args.client_default:
        out.append((CLIENT_ID, None if args.client_default else args.client_id))
    return out


def _entity_text(pairs: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in pairs)


def alter_quotas(args: argparse.Namespace, pairs: list[tuple[str, str | None]],
                 ops: list[dict[str, Any]], validate_only: bool = False) -> int:
    """AlterClientQuotas for one entity (``ops``: ``{"key", "value", "remove"}``), checked
    here first (``new_alteration``); the broker's refusal is one line, exit status 1."""
    try:
        new_alteration(pairs, ((o["key"], o["value"], o["remove"]) for o in ops))
    except QuotaError as exc:
        raise CliError(str(exc)) from None
    with connect(args) as cluster:
        resp = cluster.request_any(API_ALTER_CLIENT_QUOTAS, VERSION, {
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in pairs],
                         "ops": ops}],
            "validate_only": validate_only})
    (entry,) = resp.entries
    if int(entry.error_code):
        print(f"error: {_entity_text(pairs)}: "
              f"{error_text(int(entry.error_code), entry.error_message)}", file=sys.stderr)
        return 1
    return 0


def quota_set(args: argparse.Namespace) -> int:
    pairs = _entity(args)
    if not pairs:
        raise CliError("quota set needs --user/--user-default and/or --client-id/"
                       "--client-default")
    values: dict[str, float] = {k: getattr(args, k) for k in _RATE_FLAGS
                                if getattr(args, k) is not None}
    for item in args.add_config:
        for setting in filter(None, (s.strip() for s in item.split(","))):
            key, sep, value = setting.partition("=")
            try:
                values[key.strip()] = float(value)
            except ValueError:
                raise CliError(f"--add-config {setting!r}: expected key=number") from None
            if not sep:
                raise CliError(f"--add-config {setting!r}: expected key=number")
    if not values:
        raise CliError("quota set needs a rate: " + ", ".join(_RATE_FLAGS.values()) +
                       " or --add-config")
    ops = [{"key": k, "value": v, "remove": False} for k, v in sorted(values.items())]
    rc = alter_quotas(args, pairs, ops, args.validate_only)
    if rc == 0:
        verb = "valid" if args.validate_only else "set"
        print(f"{verb}: {_entity_text(pairs)}: " +
              ", ".join(f"{k}={_number(v)}" for k, v in sorted(values.items())))
    return rc


def quota_remove(args: argparse.Namespace) -> int:
    pairs = _entity(args)
    if not pairs:
        raise CliError("quota remove needs --user/--user-default and/or --client-id/"
                       "--client-default")
    keys = list(dict.fromkeys(args.delete_config)) or [q.value for q in QuotaType]
    rc = alter_quotas(args, pairs, [{"key": k, "value": 0.0, "remove": True} for k in keys])
    if rc == 0:
        print(f"removed: {_entity_text(pairs)}: {', '.join(keys)}")
    return rc


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def describe_quotas(args: argparse.Namespace, pairs: list[tuple[str, str | None]],
                    strict: bool, any_of: tuple[str, ...] = ()
                    ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    """DescribeClientQuotas: the quotas of the entity ``pairs`` names (``strict``: that entity
    only), plus any name of each type in ``any_of``; each as (entity, {key: value}). A refusal
    is a CliError with the broker's code and message."""
    components: list[dict[str, Any]] = []
    for t, n in pairs:
        components.append({"entity_type": t,
                           "match_type": int(MatchType.DEFAULT if n is None else MatchType.EXACT),
                           "match": n})
    components += [{"entity_type": t, "match_type": int(MatchType.ANY), "match": None}
                   for t in any_of]
    with connect(args) as cluster:
        resp = cluster.request_any(API_DESCRIBE_CLIENT_QUOTAS, VERSION,
                                   {"components": components, "strict": strict})
    if int(resp.error_code):
        raise CliError(error_text(int(resp.error_code), resp.error_message))
    return [([(str(e.entity_type), e.entity_name) for e in entry.entity],
             {str(v.key): float(v.value) for v in entry.values})
            for entry in resp.entries or ()]


def quota_list(args: argparse.Namespace) -> int:
    for pairs, values in describe_quotas(args, _entity(args), bool(args.strict)):
        text = ", ".join(f"{k}={_number(v)}" for k, v in values.items())
        print(f"{_entity_text(pairs)}: {text}")
    return 0
