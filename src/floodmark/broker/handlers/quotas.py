"""DescribeClientQuotas and AlterClientQuotas (KIP-546): client quotas are controller metadata
records (``client_quota``); these handlers translate between the wire and ``security.quotas``
values, the controller decides, and every broker's quota manager (``broker/quotas.py``) follows
the records it applies.

AlterClientQuotas judges each entry as a whole: an unknown entity type, an unknown key, a value
that is not > 0 (or not whole, for the byte rates) answers that entry INVALID_REQUEST with
Kafka's message and writes nothing for it; the other entries go on. ``validate_only`` checks
and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.errors import ErrorCode, KafkaError
from floodmark.security import (
    QuotaChanges,
    QuotaEntity,
    QuotaError,
    new_alteration,
    new_quota_filter,
)
from floodmark.wire import RequestHeader

log = logging.getLogger(__name__)


def _entity_fields(e: QuotaEntity) -> list[WireResponse]:
    return [{"entity_type": t, "entity_name": n} for t, n in e.parts]


def describe_client_quotas(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                           conn: ClientConnection | None = None) -> WireResponse:
    try:
        components = new_quota_filter((c.entity_type, int(c.match_type), c.match)
                                for c in req.components)
    except QuotaError as exc:
        return {"throttle_time": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                "error_message": str(exc), "entries": None}
    found = broker.controller.client_quotas().describe(components, bool(req.strict))
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": [
        {"entity": _entity_fields(e),
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for e, values in found]}


def alter_client_quotas(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                        conn: ClientConnection | None = None
                        ) -> WireResponse | Awaitable[WireResponse]:
    results: list[WireResponse] = []
    valid: list[tuple[QuotaEntity, QuotaChanges]] = []
    for entry in req.entries:
        pairs = [(d.entity_type, d.entity_name) for d in entry.entity]
        fields = [{"entity_type": t, "entity_name": n} for t, n in pairs]
        try:
            valid.append(new_alteration(pairs, ((op.key, float(op.value), bool(op.remove))
                                                for op in entry.ops)))
            results.append({"error_code": 0, "error_message": None, "entity": fields})
        except QuotaError as exc:
            log.warning("AlterClientQuotas from %s refused: %s", getattr(conn, "peer", "?"), exc)
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": str(exc), "entity": fields})
    if not valid or req.validate_only:
        return {"throttle_time": 0, "entries": results}
    return _alter(broker, valid, results)


async def _alter(broker: HandlerContext, valid: list[tuple[QuotaEntity, QuotaChanges]],
                 results: list[WireResponse]) -> WireResponse:
    try:
        await broker.controller.alter_client_quotas(valid)
    except KafkaError as exc:
        for r in results:
            if r["error_code"] == 0:
                r.update(error_code=int(exc.code), error_message=exc.message or None)
        return {"throttle_time": 0, "entries": results}
    for e, changes in valid:
        log.info("client quotas of %s altered: %s", e, ", ".join(
            f"{k}={'<removed>' if v is None else v}" for k, v in sorted(changes.items())))
    return {"throttle_time": 0, "entries": results}
