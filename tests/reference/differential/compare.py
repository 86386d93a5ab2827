"""Two normalised answers, field by field: every leaf that differs, with its path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MISSING = "<absent>"


@dataclass(frozen=True)
class Difference:
    scenario: str
    path: str  # step, then the field path in the answer: "bad_config.topics[0].error_code"
    kafka: Any
    floodmark: Any

    @property
    def key(self) -> str:
        return f"{self.scenario}:{self.path}"


def differences(scenario: str, kafka: Any, floodmark: Any, path: str = "") -> list[Difference]:
    if isinstance(kafka, dict) and isinstance(floodmark, dict):
        out: list[Difference] = []
        for k in list(kafka) + [k for k in floodmark if k not in kafka]:
            sub = f"{path}{k}" if k.startswith("[") or not path else f"{path}.{k}"
            out += differences(scenario, kafka.get(k, MISSING), floodmark.get(k, MISSING), sub)
        return out
    if isinstance(kafka, list) and isinstance(floodmark, list):
        named = _by_name(kafka), _by_name(floodmark)
        if named[0] is not None and named[1] is not None:
            return differences(scenario, named[0], named[1], path)
        out = []
        if len(kafka) != len(floodmark):
            out.append(Difference(scenario, f"{path}.length", len(kafka), len(floodmark)))
        for i, (a, b) in enumerate(zip(kafka, floodmark, strict=False)):
            out += differences(scenario, a, b, f"{path}[{i}]")
        return out
    if kafka != floodmark:
        return [Difference(scenario, path, kafka, floodmark)]
    return []


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    """A list of things with unique names (topics, configs, groups) compares by name, so that
    one missing config is one difference, not a shift of every one after it."""
    for key in ("name", "config_name", "group_id", "transactional_id"):
        if items and all(isinstance(i, dict) and key in i for i in items):
            names = [str(i[key]) for i in items]
            if len(set(names)) == len(names):
                return {f"[{key}={n}]": i for n, i in zip(names, items, strict=True)}
    return None
