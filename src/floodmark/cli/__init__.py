"""Every ``floodmark`` command's front end. ``floodmark.cli.main`` builds the parser from each
area's ``register(subparsers)``; ``python -m floodmark.cli`` and the ``floodmark`` console script
run it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.cli.main import build_parser, main
from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.cli import group_offsets
    from floodmark.cli.common import check_configs
    from floodmark.cli.config import RESOURCE_BROKER, RESOURCE_TOPIC, describe_configs
    from floodmark.cli.errors import CliError

__all__ = [
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "CliError",
    "build_parser",
    "check_configs",
    "describe_configs",
    "group_offsets",
    "main",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
