"""The ``floodmark`` command. Each area registers its own subcommands from its own module.

Registration modules (each exposes ``register(subparsers)``; a subcommand's handler is stored as
``func`` on its parser with ``set_defaults(func=...)`` and returns an exit code):

- ``floodmark.sim.cli``      -> ``floodmark sim scenario|explore|replay``
- ``floodmark.mc.cli``       -> ``floodmark sim check`` (model checker; registered under ``sim``)
- ``floodmark.mc.quorum.cli`` -> ``floodmark sim check-quorum`` (the controller quorum's checker)
- ``floodmark.cli.broker``   -> ``floodmark broker`` (a single broker)
- ``floodmark.cli.topic``    -> ``floodmark topic create|list|describe|delete|add-partitions|alter|
  alter-config``
- ``floodmark.cli.group``    -> ``floodmark group list|describe|delete|reset-offsets|delete-offsets``
  (moving offsets: ``floodmark.cli.group_offsets``)
- ``floodmark.cli.produce``  -> ``floodmark produce``
- ``floodmark.cli.consume``  -> ``floodmark consume``
- ``floodmark.cli.cluster``  -> ``floodmark cluster up|down|status|describe|diff|kill|start|quorum|
  health`` (health: ``floodmark.cli.health``)
- ``floodmark.cli.user``     -> ``floodmark user scram set|list|delete`` (SCRAM credentials)
- ``floodmark.demo.main``    -> ``floodmark demo`` (the README's main job)
- ``floodmark.storage.dump`` -> ``floodmark dump-log`` (read-only look inside a partition directory)
- ``floodmark.chaos.cli``    -> ``floodmark chaos fuzz`` (fault injection against real processes)
- ``floodmark.ui.cli``       -> ``floodmark ui`` (live dashboard and its JSON API)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# (module, attribute, parent group) — parent None means top level, "sim" means under `sim`.
_REGISTRARS: tuple[tuple[str, str | None], ...] = (
    ("floodmark.sim.cli", "sim"),
    ("floodmark.mc.cli", "sim"),
    ("floodmark.mc.quorum.cli", "sim"),
    ("floodmark.cli.broker", None),
    ("floodmark.cli.topic", None),
    ("floodmark.cli.group", None),
    ("floodmark.cli.acl", None),
    ("floodmark.cli.quota", None),
    ("floodmark.cli.config", None),
    ("floodmark.cli.produce", None),
    ("floodmark.cli.consume", None),
    ("floodmark.cli.cluster", None),
    ("floodmark.cli.user", None),
    ("floodmark.demo.main", None),
    ("floodmark.storage.dump", None),
    ("floodmark.chaos.cli", None),
    ("floodmark.ui.cli", None),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="floodmark",
        description="A Kafka-compatible replicated commit log (LEO, HW, ISR, leader epochs).",
    )
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("floodmark")
    except PackageNotFoundError:
        release = "unknown (not installed)"
    parser.add_argument("--version", action="version", version=f"floodmark {release}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    sim = top.add_parser("sim", help="deterministic simulator, scenarios, explorer, model checker")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    groups = {None: top, "sim": sim_sub}
    for module_name, parent in _REGISTRARS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that area is not built yet
            raise
        module.register(groups[parent])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from floodmark.address import BadAddress
    from floodmark.cli.common import CliError
    from floodmark.client.cluster import Retriable
    from floodmark.client.connection import RequestFailed
    from floodmark.cluster.local import ClusterError

    try:
        return int(func(args) or 0)
    except (RequestFailed, Retriable, BadAddress) as exc:
        print(f"error: {exc}", file=sys.stderr)  # the cluster said no, or nobody answered
        return 1
    except (CliError, ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # a user mistake, said in one line
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
