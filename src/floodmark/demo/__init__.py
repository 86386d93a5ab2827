"""The demos: ``floodmark demo`` (``main``), the Spark pipeline on a local cluster (``pipeline``),
the live single-broker tour (``live``) and the live cluster tour (``cluster``). Reached through
its command (``floodmark.cli.main`` loads ``floodmark.demo.main``); no other package imports
it."""

__all__: list[str] = []
