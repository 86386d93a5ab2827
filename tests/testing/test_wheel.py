"""``pip install`` from a built wheel, in a fresh virtualenv, as a user does it: the wheel
(``pip wheel . --no-deps``), a new venv, the wheel installed with its dependencies (from the
package index), then ``floodmark --version`` and a tiny pytest file that uses the plugin's
``floodmark_broker`` fixture (loaded by the ``pytest11`` entry point alone) with confluent-kafka.
Nothing from this checkout is on the venv's path. Slow: it installs every dependency."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

USER_TEST = '''
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

import floodmark


def test_installed_plugin(request, floodmark_broker):
    assert request.config.pluginmanager.has_plugin("floodmark")  # the entry point's name
    assert "site-packages" in floodmark.__file__
    p = Producer({"bootstrap.servers": floodmark_broker.bootstrap_servers, "acks": "all"})
    p.produce("hello", b"world", partition=0)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": floodmark_broker.bootstrap_servers, "group.id": "g"})
    c.assign([TopicPartition("hello", 0, OFFSET_BEGINNING)])
    msg = None
    for _ in range(120):
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            break
    c.close()
    assert msg is not None and msg.value() == b"world"
'''


def clean_env() -> dict[str, str]:
    """The environment without this checkout's paths or venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    return env


def run(cmd: list[str], cwd: Path, timeout_s: float = 900) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert done.returncode == 0, (cmd, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def clients_pin(name: str) -> str:
    project = PROJECT
    return next(r for r in project["optional-dependencies"]["clients"] if r.startswith(name))


@pytest.mark.slow
def test_wheel_installs_with_cli_and_plugin(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(dist)],
        tmp_path)
    (wheel,) = dist.glob("floodmark-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(zf.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(zf.read(n).decode() for n in names
                        if n.endswith(".dist-info/METADATA"))
    assert "[pytest11]\nfloodmark = floodmark.testing.plugin" in entry_points
    assert "floodmark = floodmark.cli:main" in entry_points
    for name in ("pyspark", "pyarrow", "numpy"):
        assert any(line.startswith(f"Requires-Dist: {name}") and 'extra == "spark"' in line
                   for line in metadata.splitlines()), name
    assert "floodmark/ui/static/index.html" in names and "floodmark/py.typed" in names

    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", str(wheel), "pytest",
         clients_pin("confluent-kafka")], tmp_path)
    version = run([str(venv / "bin" / "floodmark"), "--version"], tmp_path)
    assert version.strip() == f"floodmark {PROJECT['version']}"

    user = tmp_path / "user"
    user.mkdir()
    (user / "test_app.py").write_text(USER_TEST)
    out = run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
              user, timeout_s=600)
    assert "1 passed" in out, out
