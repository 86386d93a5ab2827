"""A node's environment (``floodmark.cluster.node_env``): the supervisor's floodmark first on
the path, whatever the node's working directory, and the lifeline only when asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import floodmark
from floodmark import lifeline
from floodmark.cluster.node_env import IMPORT_ROOT, node_env


def test_this_floodmark_first_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", IMPORT_ROOT, "/elsewhere"]))
    env = node_env()
    assert env["PYTHONPATH"].split(os.pathsep) == [IMPORT_ROOT, "src", "/elsewhere"]
    assert Path(IMPORT_ROOT, "floodmark", "__init__.py") == Path(floodmark.__file__).resolve()
    assert env["PYTHONUNBUFFERED"] == "1"


def test_lifeline_only_when_supervised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv(lifeline.ENV, "1")  # inherited from a supervisor of this process
    assert node_env()[lifeline.ENV] == str(os.getpid())
    assert lifeline.ENV not in node_env(supervised=False)
    assert node_env()["PYTHONPATH"] == IMPORT_ROOT
