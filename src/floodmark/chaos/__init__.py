"""Fault injection and proof on real processes (``floodmark chaos``). Reached through its
command (``floodmark.cli.main`` loads ``floodmark.chaos.cli``); no other package imports it."""

__all__: list[str] = []
