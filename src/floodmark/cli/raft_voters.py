"""``floodmark cluster add-controller|remove-controller`` (kafka-metadata-quorum.sh's commands of
the same names): AddRaftVoter / RemoveRaftVoter (KIP-853) sent through any broker, which
forwards them to the active controller; answered once the new voter set is committed.

``add-controller --controller-id N [--controller-directory-id UUID]``: the controller must run
and fetch from the leader as an observer, caught up (else REQUEST_TIMED_OUT: try again).
``remove-controller --controller-id N [--controller-directory-id UUID]``. Exit status 1 with
Kafka's error (DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT...) on stderr.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect
from floodmark.client import error_text

API_ADD_RAFT_VOTER, ADD_RAFT_VOTER_VERSION = 80, 0
API_REMOVE_RAFT_VOTER, REMOVE_RAFT_VOTER_VERSION = 81, 0
TIMEOUT_MS = 30_000


def add_parsers(sub: Any) -> None:
    for name, verb in (("add-controller", "add a controller to"),
                       ("remove-controller", "remove a controller from")):
        p = sub.add_parser(name, help=f"{verb} the controller quorum's voter set (KIP-853; "
                                      f"kafka-metadata-quorum.sh {name})")
        p.add_argument("--controller-id", type=int, required=True, metavar="N")
        p.add_argument("--controller-directory-id", default=None, metavar="UUID",
                       help="the controller's metadata directory id (default: any)")
        add_bootstrap(p)
        p.set_defaults(func=cluster_change_controllers, add=name == "add-controller")


def cluster_change_controllers(args: argparse.Namespace) -> int:
    if args.controller_id < 0:
        raise CliError("--controller-id must be a node id (>= 0)")
    directory: uuid.UUID | None = None
    if args.controller_directory_id is not None:
        try:
            directory = uuid.UUID(args.controller_directory_id)
        except ValueError:
            raise CliError(f"--controller-directory-id {args.controller_directory_id!r} is "
                           "not a UUID") from None
    body: dict[str, Any] = {"cluster_id": None, "voter_id": args.controller_id,
                            "voter_directory_id": directory}
    with connect(args) as cluster:
        if args.add:
            resp = cluster.request_any(API_ADD_RAFT_VOTER, ADD_RAFT_VOTER_VERSION, {
                **body, "timeout": TIMEOUT_MS, "listeners": []})
        else:
            resp = cluster.request_any(API_REMOVE_RAFT_VOTER, REMOVE_RAFT_VOTER_VERSION, body)
    code = int(resp.error_code)
    verb = "add" if args.add else "remove"
    if code:
        print(f"error: could not {verb} controller {args.controller_id}: "
              f"{error_text(code, resp.error_message)}", file=sys.stderr)
        return 1
    print(f"{'Added' if args.add else 'Removed'} controller {args.controller_id}"
          + (f" with directory id {directory}" if directory is not None else "")
          + (" to" if args.add else " from") + " the voter set")
    return 0
