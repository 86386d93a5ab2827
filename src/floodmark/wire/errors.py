"""The wire layer's one error: a frame that cannot be decoded."""

from __future__ import annotations

from floodmark.errors import FloodmarkError


class ProtocolError(FloodmarkError):
    """A frame that cannot be decoded; the connection that sent it is closed."""
