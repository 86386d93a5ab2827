"""The environment of a node process this process starts (a broker, a controller).

A node runs ``python -m floodmark...`` with this process's interpreter; it must import the same
floodmark as this process, wherever the child's working directory is (a relative
``PYTHONPATH=src``, a pytester run in a temporary directory, an installed wheel). So the
directory this process imported floodmark from goes first on the node's ``PYTHONPATH``. And it
dies with this process unless asked not to (``floodmark.lifeline``).
"""

from __future__ import annotations

import os
from pathlib import Path

import floodmark
from floodmark import lifeline

IMPORT_ROOT = str(Path(floodmark.__file__).resolve().parents[1])


def node_env(*, supervised: bool = True) -> dict[str, str]:
    """``os.environ`` for a node: unbuffered output, this process's floodmark first on the
    path, and (``supervised``) the lifeline to this process."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([IMPORT_ROOT, *(p for p in paths if p != IMPORT_ROOT)])
    if supervised:
        return lifeline.supervised_env(env)
    return lifeline.unsupervised_env(env)
