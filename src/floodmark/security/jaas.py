"""Kafka's JAAS text (``sasl.jaas.config``): the one entry floodmark reads, a
``PlainLoginModule`` or ``ScramLoginModule`` with ``username`` and ``password``.

The syntax is Kafka's (``JaasConfig``): ``<login module class> <control flag> [key=value ...];``
where a value is a double-quoted string (``\\`` escapes the next character) or a bare word, and
the control flag is ``required``, ``requisite``, ``sufficient`` or ``optional``. Exactly one
entry. Anything else (another login module, e.g. Kerberos's; a second entry; a missing ``;``)
is a ``ValueError`` of one line that names the setting and never shows a value: the text holds
a password.

Where it is read: a client's ``sasl.jaas.config`` (``security.client_security``: a Kafka
command-config file, Spark's ``kafka.sasl.jaas.config``) and a broker's
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (its credentials on the inter-broker
listener, ``security.inter_broker``). A PlainLoginModule entry's ``user_<name>="..."`` options
(Kafka's PLAIN users for a broker) are not read: floodmark's PLAIN users come from
``floodmark.sasl.plain.users.file``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MODULE_MECHANISMS: Mapping[str, tuple[str, ...]] = {
    PLAIN_LOGIN_MODULE: ("PLAIN",),
    SCRAM_LOGIN_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+))')


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry; ``options`` hold secrets (no repr)."""

    module: str
    flag: str
    options: Mapping[str, str] = field(repr=False)


def _tokens(text: str, what: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: ``quoted`` (unescaped), ``punct`` or ``word``."""
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"{what}: unreadable text at character {pos} (an unclosed "
                             "quote?)")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append((kind, value))
        pos = m.end()
    return out


def parse_jaas_config(text: str, what: str = "sasl.jaas.config") -> JaasEntry:
    """The one entry of ``text``; ValueError: one line naming ``what``, never a value."""
    tokens = _tokens(text, what)
    if not tokens:
        raise ValueError(f"{what} is empty")
    kind, module = tokens[0]
    if kind != "word":
        raise ValueError(f"{what}: expected a login module class first")
    if module not in MODULE_MECHANISMS:
        raise ValueError(f"{what}: login module {module!r} is not read (expected one of "
                         f"{', '.join(MODULE_MECHANISMS)})")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in CONTROL_FLAGS:
        raise ValueError(f"{what}: {module.rsplit('.', 1)[-1]} needs a control flag "
                         f"({', '.join(CONTROL_FLAGS)}) after the class name")
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(tokens):
            raise ValueError(f"{what}: the entry does not end with ';'")
        kind, word = tokens[i]
        if (kind, word) == ("punct", ";"):
            break
        if kind != "word":
            raise ValueError(f"{what}: expected an option name, found a "
                             f"{'quoted string' if kind == 'quoted' else repr(word)}")
        if (i + 2 >= len(tokens) or tokens[i + 1] != ("punct", "=")
                or tokens[i + 2][0] == "punct"):
            raise ValueError(f"{what}: option {word!r} needs ={chr(34)}value{chr(34)}")
        options[word] = tokens[i + 2][1]
        i += 3
    if i + 1 != len(tokens):
        raise ValueError(f"{what}: one login module entry only (text follows its ';')")
    return JaasEntry(module, flag, options)


def jaas_credentials(text: str, mechanism: str | None = None,
                     what: str = "sasl.jaas.config") -> tuple[str, str]:
    """``username`` and ``password`` of a JAAS entry; with ``mechanism``, its login module
    must be that mechanism's (ScramLoginModule for SCRAM-SHA-*, PlainLoginModule for PLAIN).
    ValueError: one line, never a value."""
    entry = parse_jaas_config(text, what)
    if mechanism is not None and mechanism not in MODULE_MECHANISMS[entry.module]:
        raise ValueError(f"{what}: {entry.module.rsplit('.', 1)[-1]} does not log in with "
                         f"SASL mechanism {mechanism}")
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or not password:
        raise ValueError(f'{what}: needs username="..." and password="..."')
    return username, password
