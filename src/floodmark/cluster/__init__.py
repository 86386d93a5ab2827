"""The local-cluster supervisor: a controller and N brokers as real processes on this machine
(``LocalCluster``), per-replica descriptions and data-dir diffing. ``floodmark cluster`` is its
command-line front end (``floodmark.cli.cluster``)."""

from floodmark.cluster.local import CONTROLLER_ID, LocalCluster

__all__ = ["CONTROLLER_ID", "LocalCluster"]
