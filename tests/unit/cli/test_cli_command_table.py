"""``floodmark``'s static command table (``floodmark.cli.main.COMMANDS``) says what the
registrars register: the same top-level commands, in the same order, with the same help line,
and each entry's registrars add exactly that command (or, for ``sim``, its subcommands). A call
builds only the command it names; the others are stand-ins that list the same help."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import floodmark
from floodmark.cli.main import (
    _ONE_LINE_ERRORS,
    COMMANDS,
    Command,
    build_parser,
    main,
    requested_command,
)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[
        argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1
    return found[0]


def _listing(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    """(name, help) of each command, in the order ``--help`` lists them."""
    return [(a.dest, a.help) for a in _subparsers(parser)._choices_actions]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_entry_registers_exactly_its_command(command: Command) -> None:
    holder = argparse.ArgumentParser(prog="floodmark")
    top = holder.add_subparsers(dest="command")
    if command.nested:
        # main owns the group's parser; its registrars add subcommands, never a top-level one
        group = top.add_parser(command.name, help=command.help)
        target = group.add_subparsers(dest="sub")
    else:
        target = top
    for module_name in command.registrars:
        importlib.import_module(module_name).register(target)
    assert _listing(holder) == [(command.name, command.help)]
    if command.nested:
        assert _subparsers(group)._choices_actions, "a command group with no subcommands"


def test_the_listing_is_the_same_whether_loaded_or_not() -> None:
    full = build_parser()
    nothing = build_parser(load=())
    assert _listing(full) == _listing(nothing) == [(c.name, c.help) for c in COMMANDS]
    assert full.format_help() == nothing.format_help()


def test_a_command_builds_only_its_own_parser() -> None:
    parser = build_parser(load=("topic",))
    choices = _subparsers(parser).choices
    assert _subparsers(choices["topic"]).choices  # the real one: create, list, ...
    assert not [a for a in choices["broker"]._actions if a.option_strings != ["-h", "--help"]]


@pytest.mark.parametrize(("argv", "command"), [
    ([], None),
    (["--help"], None),
    (["topic", "list", "--bootstrap-server", "x:1"], "topic"),
    (["-h", "sim", "check"], "sim"),
    (["--", "dump-log", "d"], "dump-log"),
    (["nope"], "nope"),
])
def test_requested_command(argv: list[str], command: str | None) -> None:
    assert requested_command(argv) == command


def test_topic_list_imports_no_other_area() -> None:
    """The point of the table: a client command's process never loads the simulator, the model
    checker, the chaos tools or the dashboard's web server."""
    code = ("import sys\n"
            "from floodmark.cli.main import build_parser\n"
            "build_parser(load=('topic',)).parse_args(['topic', 'list', '--bootstrap-server', "
            "'127.0.0.1:1'])\n"
            "print(' '.join(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    loaded = set(proc.stdout.split())
    assert "floodmark.cli.topic" in loaded
    for area in ("floodmark.sim", "floodmark.mc", "floodmark.chaos", "floodmark.ui",
                 "floodmark.demo", "aiohttp"):
        assert area not in loaded, area


@pytest.mark.parametrize(("module", "name"), _ONE_LINE_ERRORS)
def test_one_line_errors_name_real_exceptions(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, Exception)


def test_a_user_mistake_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The client's errors are reported as one line even though main never imports them."""
    code = main(["topic", "list", "--bootstrap-server", "no-port-here"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: ") and err.count("\n") == 1, err


# Registrars that another registrar calls (not listed in the table themselves), and modules whose
# ``register`` is not a command's (Spark's data source).
CALLED_BY_ANOTHER = {"floodmark.cli.group_offsets": "floodmark.cli.group",
                     "floodmark.sim.quorum.cli": "floodmark.sim.cli"}
NOT_COMMANDS = {"floodmark.spark"}


def test_every_registrar_in_the_tree_is_reached_from_the_table() -> None:
    """A new area's ``register`` that nobody lists would be a command nobody can run."""
    src = Path(floodmark.__file__).parent
    found = set()
    for path in src.rglob("*.py"):
        if re.search(r"^def register\(", path.read_text(), re.MULTILINE):
            parts = path.relative_to(src.parent).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    listed = {m for c in COMMANDS for m in c.registrars}
    assert found - NOT_COMMANDS == listed | set(CALLED_BY_ANOTHER)
    for module, caller in CALLED_BY_ANOTHER.items():
        text = (src.parent / (caller.replace(".", "/") + ".py")).read_text()
        assert f"{module.rsplit('.', 1)[1]}.register(" in text, f"{caller} no longer calls it"
