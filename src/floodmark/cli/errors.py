"""The CLI's one exception: a user mistake a command refuses. A module of its own so the checks
that run before a broker starts (``cli.checks``) do not load the client commands' helpers."""

from floodmark.errors import FloodmarkError


class CliError(FloodmarkError):
    """A user mistake the command refuses: printed as ``error: <message>``, exit code 1."""
