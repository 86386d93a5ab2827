"""The ``floodmark`` command. Each area registers its own subcommands from its own module.

Registration modules expose ``register(subparsers)``; a subcommand's handler is stored as
``func`` on its parser with ``set_defaults(func=...)`` and returns an exit code. ``COMMANDS``
below is the static table of top-level commands: name, one-line help, and the module(s) that
register it. A call imports only the registrar of the command it names (``floodmark topic list``
never loads the simulator, the model checker or the dashboard's web server); every other command
is listed by its table entry, so ``floodmark --help`` and argparse's "invalid choice" error still
name every command. ``tests/unit/cli/test_command_table.py`` checks that the table says what
the registrars register, so the two cannot drift apart.

Subcommands worth knowing where to find: ``floodmark group reset-offsets|delete-offsets`` live in
``floodmark.cli.group_offsets``; ``floodmark cluster health`` in ``floodmark.cli.health``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One top-level command. ``registrars`` each expose ``register(subparsers)``; for a group
    (``nested``), main owns the command's parser and the registrars add its subcommands."""

    name: str
    help: str
    registrars: tuple[str, ...]
    nested: bool = False


COMMANDS: tuple[Command, ...] = (
    Command("sim", "deterministic simulator, scenarios, explorer, model checker",
            ("floodmark.sim.cli",  # scenario, explore, replay, quorum
             "floodmark.sim.groups.cli",  # groups (the classic group coordinator)
             "floodmark.mc.cli",  # check (the model checker)
             "floodmark.mc.quorum.cli"),  # check-quorum (the controller quorum's checker)
            nested=True),
    Command("broker", "run a Kafka-compatible broker (broker+controller)",
            ("floodmark.cli.broker",)),
    Command("topic", "create, list, describe, delete topics, add partitions or alter their "
                     "configs", ("floodmark.cli.topic",)),
    Command("group", "consumer groups: list, describe, delete, reset or delete offsets "
                     "(kafka-consumer-groups.sh)", ("floodmark.cli.group",)),
    Command("share-group", "KIP-932 share groups: list, describe (kafka-share-groups.sh)",
            ("floodmark.cli.share_group",), nested=True),
    Command("acl", "add, list, remove ACLs (kafka-acls.sh)", ("floodmark.cli.acl",)),
    Command("quota", "set, list, remove client quotas (kafka-configs.sh --entity-type "
                     "users/clients)", ("floodmark.cli.quota",)),
    Command("config", "describe or alter configs of topics, brokers, users and clients "
                      "(kafka-configs.sh)", ("floodmark.cli.config",)),
    Command("produce", "produce lines (stdin or --file) to a topic", ("floodmark.cli.produce",)),
    Command("consume", "print a topic's records, one per line", ("floodmark.cli.consume",)),
    Command("cluster", "a local replicated cluster: up, down, status, describe, diff, kill, "
                       "start, quorum, health, elect-leaders, log-dirs, "
                       "reassign-partitions", ("floodmark.cli.cluster",)),
    Command("user", "users' SCRAM credentials", ("floodmark.cli.user",)),
    Command("demo", "the main job: a Spark pipeline on a local cluster with a leader SIGKILL "
                    "(--tour: the guided tour of the replication scenarios)",
            ("floodmark.demo.main",)),
    Command("dump-log", "print the batches, epochs and indexes of a partition directory",
            ("floodmark.storage.dump",)),
    Command("chaos", "fault injection against real processes", ("floodmark.chaos.cli",)),
    Command("ui", "live dashboard: each replica's log, HW, LEO, ISR, epochs (web page + JSON API)",
            ("floodmark.ui.cli",)),
)


class _VersionAction(argparse.Action):
    """``--version``, with the installed release looked up only when asked for (reading the
    package metadata costs more start-up than most commands' own work)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS,
                 help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("floodmark")
        except PackageNotFoundError:
            release = "unknown (not installed)"
        print(f"floodmark {release}")
        parser.exit()


def requested_command(argv: Sequence[str]) -> str | None:
    """The top-level command ``argv`` names: its first word that is not an option (the top
    level's only options, ``-h`` and ``--version``, take no value)."""
    for word in argv:
        if word == "--":
            continue
        if not word.startswith("-"):
            return word
    return None


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser. ``load``: the commands whose registrars are imported and run (``None``:
    every command's); any other command is a stand-in parser that carries only its help line."""
    parser = argparse.ArgumentParser(
        prog="floodmark",
        description="A Kafka-compatible replicated commit log (LEO, HW, ISR, leader epochs).",
    )
    parser.add_argument("--version", action=_VersionAction)
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if load is not None and command.name not in load:
            top.add_parser(command.name, help=command.help)
            continue
        if command.nested:
            group = top.add_parser(command.name, help=command.help)
            subparsers = group.add_subparsers(dest=f"{command.name}_command",
                                              metavar=f"{command.name.upper()}_COMMAND")
        else:
            subparsers = top
        for module_name in command.registrars:
            importlib.import_module(module_name).register(subparsers)
    return parser


# The exceptions a command reports as one line, exit code 1, instead of a traceback: the cluster
# said no or nobody answered (RequestFailed, Retriable, BadAddress), or a user mistake (CliError,
# ClusterError). Named rather than imported: only a module a command has loaded can have raised
# one of its exceptions, and loading them all would cost every command (the broker too) the
# client's and the cluster supervisor's start-up.
_ONE_LINE_ERRORS: tuple[tuple[str, str], ...] = (
    ("floodmark.client.connection", "RequestFailed"),
    ("floodmark.client.cluster", "Retriable"),
    ("floodmark.address", "BadAddress"),
    ("floodmark.cli.errors", "CliError"),
    ("floodmark.cluster.local", "ClusterError"),
)


def _one_line_errors() -> tuple[type[Exception], ...]:
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in _ONE_LINE_ERRORS)
    return tuple(cls for cls in loaded if isinstance(cls, type) and issubclass(cls, Exception))


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    wanted = requested_command(argv)
    parser = build_parser(load=() if wanted is None else (wanted,))
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if isinstance(exc, _one_line_errors()):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
