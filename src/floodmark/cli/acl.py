"""``floodmark acl add|list|remove``: ACLs in kafka-acls.sh's vocabulary (principals, hosts,
operations, resource patterns), through CreateAcls / DescribeAcls / DeleteAcls.

``add`` makes one ALLOW binding per (resource, --allow-principal, --allow-host, --operation)
and one DENY binding per (resource, --deny-principal, --deny-host, --operation); hosts default
to ``*`` and the operation to All, as kafka-acls does. ``remove`` removes exactly those (or,
without principals, every ACL of the resources named). ``list`` shows the ACLs of the resources
named (every ACL without one), ``--resource-pattern-type`` any by default (match: those that
apply to the names).
"""

from __future__ import annotations

import argparse
from typing import Any

from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    connect,
)
from floodmark.client import error_text
from floodmark.security import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    new_binding,
)

API_DESCRIBE_ACLS, API_CREATE_ACLS, API_DELETE_ACLS = 29, 30, 31
VERSION = 3

_OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation
               if op not in (AclOperation.ANY, AclOperation.UNKNOWN)}


def _operation(text: str) -> AclOperation:
    op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise argparse.ArgumentTypeError(
            f"unknown operation {text!r} (one of: {', '.join(sorted(_OPERATIONS))})")
    return op


def register(subparsers: Any) -> None:
    acl = subparsers.add_parser("acl", help="add, list, remove ACLs (kafka-acls.sh)")
    asub = acl.add_subparsers(dest="acl_command", metavar="ACTION")
    for name, func, help_text in (("add", acl_add, "add ACLs"),
                                  ("list", acl_list, "list ACLs"),
                                  ("remove", acl_remove, "remove ACLs")):
        p = asub.add_parser(name, help=help_text)
        p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
        p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
        p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
        p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        p.add_argument("--operation", action="append", default=[], type=_operation,
                       metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, "
                       "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All "
                       "(default All)")
        p.add_argument("--topic", action="append", default=[])
        p.add_argument("--group", action="append", default=[])
        p.add_argument("--transactional-id", action="append", default=[])
        p.add_argument("--cluster", action="store_true")
        p.add_argument("--resource-pattern-type", default=None,
                       choices=["literal", "prefixed", "any", "match"],
                       help="literal (default of add/remove), prefixed; list: any (default), "
                            "match")
        if name == "list":
            p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                           help="only the ACLs of these principals")
        add_bootstrap(p)
        p.set_defaults(func=func)
    acl.set_defaults(func=lambda a: (acl.print_help(), 2)[1])


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _pattern(args: argparse.Namespace, default: str) -> PatternType:
    return PatternType[(args.resource_pattern_type or default).upper()]


def _entries(args: argparse.Namespace) -> list[tuple[AclPermissionType, str, str]]:
    out = []
    for perm, principals, hosts in ((AclPermissionType.ALLOW, args.allow_principal,
                                     args.allow_host),
                                    (AclPermissionType.DENY, args.deny_principal,
                                     args.deny_host)):
        out += [(perm, p, h) for p in principals for h in (hosts or [WILDCARD])]
    return out


def _binding_fields(rt: ResourceType, name: str, pt: PatternType, principal: str | None,
                    host: str | None, op: AclOperation, perm: AclPermissionType
                    ) -> dict[str, Any]:
    return {"resource_type": int(rt), "resource_name": name, "resource_pattern_type": int(pt),
            "principal": principal, "host": host, "operation": int(op),
            "permission_type": int(perm)}


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
            "host_filter": f.host, "operation": int(f.operation),
            "permission_type": int(f.permission)}


def _check_operations(rt: ResourceType, ops: list[AclOperation]) -> None:
    bad = [op.name for op in ops if op is not AclOperation.ALL
           and op not in SUPPORTED_OPERATIONS[rt]]
    if bad:
        raise CliError(f"resource type {rt.name} does not support operation(s) {bad}; it "
                       f"supports {sorted(o.name for o in SUPPORTED_OPERATIONS[rt])}")


def acl_add(args: argparse.Namespace) -> int:
    resources = _resources(args)
    entries = _entries(args)
    if not resources or not entries:
        raise CliError("acl add needs a resource (--topic, --group, --transactional-id, "
                       "--cluster) and --allow-principal or --deny-principal")
    pattern = _pattern(args, "literal")
    ops = args.operation or [AclOperation.ALL]
    creations = []
    for rt, name in resources:
        _check_operations(rt, ops)
        for perm, principal, host in entries:
            for op in ops:
                try:
                    new_binding(rt, name, pattern, principal, host, op, perm)
                except AclError as exc:
                    raise CliError(str(exc)) from None
                creations.append(_binding_fields(rt, name, pattern, principal, host, op, perm))
    with connect(args) as cluster:
        resp = cluster.request_any(API_CREATE_ACLS, VERSION, {"creations": creations})
    failed = 0
    for c, r in zip(creations, resp.results, strict=True):
        if int(r.error_code):
            failed += 1
            print(f"error: {_describe(c)}: {error_text(int(r.error_code), r.error_message)}")
        else:
            print(f"added {_describe(c)}")
    return 1 if failed else 0


def _describe(c: dict[str, Any]) -> str:
    return (f"{AclPermissionType(c['permission_type']).name} {c['principal']} from "
            f"{c['host']} {AclOperation(c['operation']).name} on "
            f"{ResourceType(c['resource_type']).name}:"
            f"{PatternType(c['resource_pattern_type']).name}:{c['resource_name']}")


def acl_remove(args: argparse.Namespace) -> int:
    resources = _resources(args)
    if not resources:
        raise CliError("acl remove needs a resource (--topic, --group, --transactional-id, "
                       "--cluster)")
    pattern = _pattern(args, "literal")
    ops = args.operation or [AclOperation.ALL]
    filters = []
    entries = _entries(args)
    for rt, name in resources:
        if not entries:
            filters.append(AclBindingFilter(rt, name, pattern))
            continue
        for perm, principal, host in entries:
            for op in ops:
                filters.append(AclBindingFilter(rt, name, pattern, principal, host, op, perm))
    with connect(args) as cluster:
        resp = cluster.request_any(API_DELETE_ACLS, VERSION,
                                   {"filters": [_filter_fields(f) for f in filters]})
    rc = 0
    for r in resp.filter_results:
        if int(r.error_code):
            rc = 1
            print(f"error: {error_text(int(r.error_code), r.error_message)}")
        for m in r.matching_acls:
            print(f"removed {_describe({**_binding_fields(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type), m.principal, m.host, AclOperation(m.operation), AclPermissionType(m.permission_type))})}")
    return rc


def acl_list(args: argparse.Namespace) -> int:
    pattern = _pattern(args, "any")
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or [
        (ResourceType.ANY, None)]
    principals: list[str | None] = list(args.principal) or [None]
    rc = 0
    with connect(args) as cluster:
        for rt, name in resources:
            for principal in principals:
                f = AclBindingFilter(rt, name, pattern, principal)
                resp = cluster.request_any(API_DESCRIBE_ACLS, VERSION, _filter_fields(f))
                if int(resp.error_code):
                    print(f"error: {error_text(int(resp.error_code), resp.error_message)}")
                    rc = 1
                    continue
                for r in resp.resources:
                    print(f"Current ACLs for resource `{ResourceType(r.resource_type).name}:"
                          f"{PatternType(r.pattern_type).name}:{r.resource_name}`:")
                    for a in r.acls:
                        print(f"\t{a.principal} has {AclPermissionType(a.permission_type).name}"
                              f" permission for operation {AclOperation(a.operation).name} "
                              f"from host {a.host}")
    return rc
