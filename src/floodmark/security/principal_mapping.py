"""``ssl.principal.mapping.rules``: an mTLS client certificate's subject to a principal's name.

Kafka's syntax: a comma- (or newline-) separated list of rules, tried in order, the first that
matches the whole distinguished name (RFC 2253 form, ``CN=alice,OU=eng,O=acme``) wins:

* ``DEFAULT``: the distinguished name as it is;
* ``RULE:pattern/replacement/`` with an optional ``L`` (lower case) or ``U`` (upper case) after
  the last slash. ``pattern`` is a regular expression that must match the whole name;
  ``replacement`` may use ``$1``... for its groups (Java's syntax, as Kafka's docs write it).
  ``\\/`` is a slash inside either part.

No rule matching is an authentication failure (Kafka's ``NoMatchingRule``), not ``ANONYMOUS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from floodmark.errors import FloodmarkError

SETTING = "ssl.principal.mapping.rules"

# RULE:<pattern>/<replacement>/<flags>  with \/ allowed inside the two parts.
_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)")


class NoMatchingRule(FloodmarkError, ValueError):
    """No rule of ``ssl.principal.mapping.rules`` matched a certificate's subject."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        m = self.pattern.fullmatch(name)
        if m is None:
            return None
        out = m.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _java_replacement(text: str) -> str:
    """Java's ``$1`` and ``\\$`` to Python's ``\\g<1>`` and ``$``; a backslash escapes."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_rules(text: str | None) -> tuple[MappingRule, ...]:
    """The rules of ``ssl.principal.mapping.rules`` (None or blank: ``DEFAULT``). ValueError,
    one line naming the setting, for anything else."""
    if text is None or not text.strip():
        return (MappingRule(None),)
    rules: list[MappingRule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            break
        if text.startswith("DEFAULT", pos):
            rules.append(MappingRule(None))
            pos += len("DEFAULT")
        else:
            m = _RULE.match(text, pos)
            if m is None:
                raise ValueError(f"{SETTING}: {text[pos:pos + 40]!r} is neither DEFAULT nor "
                                 "RULE:pattern/replacement/[LU]")
            pattern = m.group(1).replace("\\/", "/")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{SETTING}: bad pattern {pattern!r}: {exc}") from None
            replacement = _java_replacement(m.group(2).replace("\\/", "/"))
            if any(g.isdigit() and int(g) > compiled.groups
                   for g in re.findall(r"\\g<(\d+)>", replacement)):
                raise ValueError(f"{SETTING}: replacement {m.group(2)!r} names a group the "
                                 f"pattern {pattern!r} does not have")
            rules.append(MappingRule(compiled, replacement, m.group(3)))
            pos = m.end()
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] not in ",\n\r":
            raise ValueError(f"{SETTING}: unexpected {text[pos:pos + 20]!r} after a rule")
    if not rules:
        return (MappingRule(None),)
    return tuple(rules)


def map_name(rules: tuple[MappingRule, ...], distinguished_name: str) -> str:
    """The principal name of ``distinguished_name`` by the first matching rule."""
    for rule in rules:
        out = rule.apply(distinguished_name)
        if out is not None:
            return out
    raise NoMatchingRule(f"no rule of {SETTING} matches the certificate subject "
                         f"{distinguished_name!r}")
