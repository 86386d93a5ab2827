"""UpdateFeatures (KIP-584): an operator finalizes a feature at a new level (Kafka's
``kafka-features upgrade --feature transaction.version=2``). The controller decides
(``ControllerLogic.update_features``, the rules in ``floodmark.features``) and writes a
``feature_level`` record; every broker's ApiVersions follows the record it applies. Reading the
levels needs no API of its own: ApiVersions answers them (``kafka-features describe``).

All or nothing, as in Kafka: one refused update refuses the request (INVALID_UPDATE_VERSION,
with the reason) and nothing is written. v0–1 answer each feature too (the same error);
v2 only at the top.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire import RequestHeader

log = logging.getLogger(__name__)

PER_FEATURE_RESULTS_BEFORE = 2  # v2 answers only the top-level error


def _answer(version: int, names: list[str], error: ErrorCode, message: str | None
            ) -> WireResponse:
    out: WireResponse = {"throttle_time": 0, "error_code": int(error), "error_message": message}
    if version < PER_FEATURE_RESULTS_BEFORE:
        out["results"] = [{"feature": name, "error_code": int(error), "error_message": message}
                          for name in names]
    return out


def update_features(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                    conn: ClientConnection | None = None) -> Awaitable[WireResponse]:
    version = header.api_version
    updates = [(str(u.feature), int(u.max_version_level),
                int(getattr(u, "upgrade_type", 1)) if version >= 1
                else (3 if getattr(u, "allow_downgrade", False) else 1))
               for u in req.feature_updates]
    names = [name for name, _, _ in updates]
    validate_only = bool(getattr(req, "validate_only", False))

    async def answer() -> WireResponse:
        if len(set(names)) != len(names):
            return _answer(version, names, ErrorCode.INVALID_REQUEST,
                           "the same feature is named twice")
        try:
            refusals = await broker.controller.update_features(updates, validate_only)
        except KafkaError as exc:
            return _answer(version, names, exc.code, exc.message)
        why = [f"{reason}" for _, reason in refusals if reason is not None]
        if why:
            log.info("UpdateFeatures refused: %s", "; ".join(why)[:500])
            return _answer(version, names, ErrorCode.INVALID_UPDATE_VERSION, "; ".join(why))
        return _answer(version, names, ErrorCode.NONE, None)

    return answer()
