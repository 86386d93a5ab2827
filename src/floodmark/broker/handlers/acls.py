"""DescribeAcls, CreateAcls, DeleteAcls (KIP-140): ACLs are controller metadata records
(``acl`` / ``remove_acl``); these handlers translate between the wire and ``security.acl``
values, the controller decides and every broker's authorizer follows the records it applies.

Without an authorizer (``authorizer.class.name`` unset) each answers SECURITY_DISABLED, as
Kafka does. A binding or filter Kafka refuses (an unknown resource type, a MATCH pattern in a
creation, a principal that is not ``Type:name``) answers INVALID_REQUEST with Kafka's message,
and only that one: the others of the same request go on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.errors import ErrorCode, KafkaError
from floodmark.security import AclBinding, AclBindingFilter, AclError, new_binding, new_filter
from floodmark.wire import RequestHeader

log = logging.getLogger(__name__)

_DISABLED = "No Authorizer is configured on the broker"


def _enabled(broker: HandlerContext) -> bool:
    return bool(str(broker.config.get("authorizer.class.name") or ""))


def _filter(f: WireRequest) -> AclBindingFilter:
    return new_filter(int(f.resource_type_filter), f.resource_name_filter,
                      int(f.pattern_type_filter), f.principal_filter, f.host_filter,
                      int(f.operation), int(f.permission_type))


def _acl_fields(b: AclBinding) -> WireResponse:
    return {"principal": b.entry.principal, "host": b.entry.host,
            "operation": int(b.entry.operation), "permission_type": int(b.entry.permission)}


def describe_acls(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                  conn: ClientConnection | None = None) -> WireResponse:
    if not _enabled(broker):
        return {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": _DISABLED,
                "resources": []}
    try:
        flt = _filter(req)
    except AclError as exc:
        return {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc),
                "resources": []}
    by_pattern: dict[tuple[int, str, int], list[WireResponse]] = {}
    for _id, b in sorted(broker.controller.acls().matching(flt), key=lambda m: str(m[1])):
        p = b.pattern
        by_pattern.setdefault((int(p.resource_type), p.name, int(p.pattern_type)), []).append(
            _acl_fields(b))
    return {"error_code": 0, "error_message": None, "resources": [
        {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
        for (rt, name, pt), acls in by_pattern.items()]}


def create_acls(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                conn: ClientConnection | None = None
                ) -> WireResponse | Awaitable[WireResponse]:
    if not _enabled(broker):
        return {"results": [{"error_code": int(ErrorCode.SECURITY_DISABLED),
                             "error_message": _DISABLED} for _ in req.creations]}
    results: list[WireResponse] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        try:
            valid.append(new_binding(int(c.resource_type), c.resource_name,
                                     int(c.resource_pattern_type), c.principal, c.host,
                                     int(c.operation), int(c.permission_type)))
            results.append({"error_code": 0, "error_message": None})
        except AclError as exc:
            log.warning("CreateAcls from %s refused: %s", getattr(conn, "peer", "?"), exc)
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": str(exc)})
    if not valid:
        return {"results": results}
    return _create(broker, valid, results)


async def _create(broker: HandlerContext, valid: list[AclBinding],
                  results: list[WireResponse]) -> WireResponse:
    try:
        await broker.controller.create_acls(valid)
    except KafkaError as exc:
        for r in results:
            if r["error_code"] == 0:
                r.update(error_code=int(exc.code), error_message=exc.message or None)
        return {"results": results}
    for b in valid:
        log.info("ACL created: %s", b)
    return {"results": results}


def delete_acls(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                conn: ClientConnection | None = None
                ) -> WireResponse | Awaitable[WireResponse]:
    if not _enabled(broker):
        return {"filter_results": [{"error_code": int(ErrorCode.SECURITY_DISABLED),
                                    "error_message": _DISABLED, "matching_acls": []}
                                   for _ in req.filters]}
    filters: list[AclBindingFilter | None] = []
    errors: list[str] = []
    for f in req.filters:
        try:
            filters.append(_filter(f))
            errors.append("")
        except AclError as exc:
            filters.append(None)
            errors.append(str(exc))
    return _delete(broker, filters, errors)


async def _delete(broker: HandlerContext, filters: list[AclBindingFilter | None],
                  errors: list[str]) -> WireResponse:
    valid = [f for f in filters if f is not None]
    try:
        matched = await broker.controller.delete_acls(valid) if valid else []
    except KafkaError as exc:
        return {"filter_results": [{"error_code": int(exc.code), "error_message": exc.message,
                                    "matching_acls": []} for _ in filters]}
    found = iter(matched)
    out: list[WireResponse] = []
    for f, error in zip(filters, errors, strict=True):
        if f is None:
            out.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": error,
                        "matching_acls": []})
            continue
        bindings = next(found)
        for b in bindings:
            log.info("ACL deleted: %s", b)
        out.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": int(b.pattern.resource_type),
             "resource_name": b.pattern.name, "pattern_type": int(b.pattern.pattern_type),
             **_acl_fields(b)} for b in bindings]})
    return {"filter_results": out}
