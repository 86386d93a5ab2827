"""The local-cluster supervisor: a controller and N brokers as real processes on this machine
(``LocalCluster``), per-replica descriptions and data-dir diffing. ``floodmark cluster`` is its
command-line front end (``floodmark.cli.cluster``).

The face's names load ``cluster.local`` on first use, so importing a small part of the package
(``cluster.layout``, ``cluster.waiting``) does not load the supervisor and its TLS tooling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from floodmark.cluster.local import CONTROLLER_ID, LocalCluster

__all__ = ["CONTROLLER_ID", "LocalCluster"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from floodmark.cluster import local

        return getattr(local, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
