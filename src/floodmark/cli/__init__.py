"""Every ``floodmark`` command's front end. ``floodmark.cli.main`` builds the parser from each
area's ``register(subparsers)``; ``python -m floodmark.cli`` and the ``floodmark`` console script
run it."""

from floodmark.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
