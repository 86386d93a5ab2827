"""``floodmark chaos run`` end to end: a controller and three brokers, each in a network namespace
of its own, confluent-kafka and kafka-python clients, a seeded fault schedule, the checker.

The default configuration must come out valid under kills and pauses (the CI-sized run), and each
unsafe setting must be caught by the fault that tells its story (seeds 000-002, Jepsen 2013):

* ``--acks 1`` + ``isolate-leader``: the cut-off leader acknowledges alone, then truncates;
* ``--truncation high-watermark`` + ``failover-twice``: a follower cuts its log to its stale HW
  when the leader changes and is elected before it refetched;
* ``--unclean`` + ``isolate-then-kill``: a replica out of the ISR is elected;
* ``--eligible-leader-replicas-version 0`` + ``pause-then-power-cut``: the last ISR member loses
  its power and is elected again from what it fsynced (issue 13's finding 5); the default
  (KIP-966) comes out valid under the same fault.

Each is run through the real CLI (``--json``) and judged from its output; the runs wait on the
processes they start (bounded), never on fixed sleeps of the test's own. The runs that show an
unsafe setting is caught end once it has been: no quiet period (``--quiet-s 0``: the final read
follows the recovery), a time limit that ends with the one fault (the schedule asserted equal to
the longer run's), or ``--end-on-anomaly`` (the faults left are skipped once the history shows
an inconsistent offset); the verdict is the checker's over the whole run either way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import LabError, check_available
from floodmark.chaos.schedule import plan

pytestmark = pytest.mark.integration


def _lab_or_skip() -> None:
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))


def chaos_run(tmp_path: Path, *args: str, timeout_s: float = 600) -> tuple[int, dict[str, Any]]:
    _lab_or_skip()
    argv = [sys.executable, "-m", "floodmark.cli", "chaos", "run", "--json",
            "--work-dir", str(tmp_path / "run"), "--name", f"t{os.getpid() % 1000}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    assert done.stdout.strip(), f"no output (exit {done.returncode}): {done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    summary = {k: v for k, v in result.items() if k not in ("anomalies", "leaders")}
    print(json.dumps(summary)[:3000])
    return done.returncode, result


def _assert_contract(result: dict[str, Any], seed: int) -> None:
    for key in ("valid", "acknowledged", "anomalies", "faults", "seed"):
        assert key in result, key
    for name in ("lost", "duplicated", "inconsistent_offsets", "nonmonotonic", "aborted_read"):
        assert isinstance(result["anomalies"][name], list), name
    assert result["seed"] == seed
    assert result["faults"], "no fault was injected"


# Seed 3's kill,pause schedule: each of these once in 40 s (in 60 s, kill-leader and pause-one
# came again: the same faults twice, for half as much CPU again).
DEFAULT_RUN_FAULTS = ["kill-leader", "pause-one", "kill-all", "pause-leader"]


def test_default_configuration_survives_kills_and_pauses(tmp_path: Path) -> None:
    assert [f.name for f in plan(3, ["kill", "pause"], 40)] == DEFAULT_RUN_FAULTS
    code, result = chaos_run(tmp_path, "--time-limit-s", "40", "--faults", "kill,pause",
                             "--seed", "3")
    _assert_contract(result, 3)
    assert [f["name"] for f in result["faults"]] == DEFAULT_RUN_FAULTS
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    assert result["final"]["complete"]
    assert result["acknowledged"] > 1300, result["acknowledged"]  # 2 producers x 40/s


# The one fault of seed 1 (3 s in, 6.8 s long): a 10 s run has the same as a 12 or 20 s one,
# which only ran on after it.
ONE_FAULT_TIME_LIMIT_S = 10


def _one_fault(fault: str) -> str:
    assert plan(1, [fault], ONE_FAULT_TIME_LIMIT_S) == plan(1, [fault], 20)
    assert [f.name for f in plan(1, [fault], ONE_FAULT_TIME_LIMIT_S)] == [fault]
    return str(ONE_FAULT_TIME_LIMIT_S)


def test_acks_1_under_leader_isolation_is_caught(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--time-limit-s", _one_fault("isolate-leader"),
                             "--faults", "isolate-leader", "--acks", "1", "--seed", "1",
                             "--quiet-s", "0")
    _assert_contract(result, 1)
    assert code == 1 and not result["valid"]
    assert result["anomaly_counts"]["lost"] > 0, result["anomaly_counts"]


def test_unclean_election_is_caught(tmp_path: Path) -> None:
    # the fault outlasts the 12 s (~16 s: it waits for the ISR to shrink and the restarts)
    assert [f.name for f in plan(1, ["isolate-then-kill"], 12)] == ["isolate-then-kill"]
    code, result = chaos_run(tmp_path, "--time-limit-s", "12", "--faults", "isolate-then-kill",
                             "--unclean", "--seed", "1", "--quiet-s", "0")
    _assert_contract(result, 1)
    assert code == 1 and not result["valid"]
    assert result["anomaly_counts"]["lost"] > 0, result["anomaly_counts"]


def test_high_watermark_truncation_is_caught(tmp_path: Path) -> None:
    # up to eight stories, each losing the ~one batch the cut-off follower had not yet seen
    # committed when the race goes that way; the run ends after the first that did. Once
    # serial (at load 16 a 60 s run of five stories came out valid); at load 8-23, beside
    # other chaos runs, the first or the second story caught it in each of 13 runs (about two
    # stories in three catch it): the three more stories are the margin against five misses,
    # costing nothing when an earlier one catches it.
    assert [f.name for f in plan(1, ["failover-twice"], 90)] == ["failover-twice"] * 8
    code, result = chaos_run(tmp_path, "--time-limit-s", "90", "--faults", "failover-twice",
                             "--truncation", "high-watermark", "--rate", "100", "--seed", "1",
                             "--end-on-anomaly", "--quiet-s", "0")
    _assert_contract(result, 1)
    assert code == 1 and not result["valid"]
    counts = result["anomaly_counts"]
    assert counts["lost"] + counts["inconsistent_offsets"] > 0, counts
    # what ended the schedule is in the verdict (its lines were numbered in the history so far)
    ended = result["ended_early"]
    assert len(result["faults"]) == ended["after_faults"], (result["faults"], ended)
    first = ended["inconsistent_offsets"][0]
    assert any(a["kind"] == first["kind"] and a["key"] == first["key"]
               and a.get("offset") == first.get("offset") and a.get("value") == first.get("value")
               and set(first.get("values", ())) <= set(a.get("values", ()))
               for a in result["anomalies"]["inconsistent_offsets"]), (first, counts)


@pytest.mark.parametrize("elr", ["1", "0"], ids=["elr", "no-elr-unsafe"])
def test_power_cut_of_the_last_isr_member(tmp_path: Path, elr: str) -> None:
    # one story (30 s told it twice, 20 s once and ran on after it); the valid run keeps its
    # quiet period, the unsafe one ends at its final read
    quiet = ["--quiet-s", "0"] if elr == "0" else []
    code, result = chaos_run(tmp_path, "--time-limit-s", _one_fault("pause-then-power-cut"),
                             "--faults", "pause-then-power-cut",
                             "--eligible-leader-replicas-version", elr, "--seed", "1", *quiet)
    _assert_contract(result, 1)
    cuts = [f for f in result["faults"] if f["name"] == "pause-then-power-cut"]
    assert len(cuts) == 1 and all(f["isr_at_cut"] == f["targets"] for f in cuts), cuts
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    if elr == "1":
        assert all(f["elr_at_cut"] for f in cuts), cuts
        assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    else:
        assert code == 1 and not result["valid"]
        assert counts.get("lost", 0) > 0, counts


def test_sasl_ssl_cluster_survives_kills_and_pauses(tmp_path: Path) -> None:
    """The default run's faults on ``cluster up --security sasl_ssl``'s cluster: SASL_SSL +
    SCRAM-SHA-512 on the client and inter-broker listeners (every client logs in as the admin,
    the brokers as ``floodmark-node``), mTLS on the controller channel (issue 21: the chaos run
    with every listener and internal channel secured, in the default suite)."""
    code, result = chaos_run(tmp_path, "--time-limit-s", "40", "--faults", "kill,pause",
                             "--seed", "3", "--security", "sasl_ssl")
    _assert_contract(result, 3)
    assert result["config"]["security"] == "sasl_ssl"
    assert [f["name"] for f in result["faults"]] == DEFAULT_RUN_FAULTS
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    assert result["final"]["complete"]
    assert result["acknowledged"] > 1300, result["acknowledged"]  # 2 producers x 40/s
    # A broker's login may be refused by a peer that has just restarted and not yet read the
    # SCRAM credential from the metadata log (seen: once per run, accepted again 0.5 s later);
    # every refusal must end with the peer accepting it again (``peer_logins``' lines), or with
    # the refused broker's process ending (killed by a fault: its successor starts afresh).
    for log in (tmp_path / "run" / "cluster" / "logs").glob("broker-*.log"):
        open_refusals: set[tuple[str, str]] = set()
        for line in log.read_text(errors="replace").splitlines():
            if re.search(r"broker \d+ registered broker_epoch=", line):
                open_refusals.clear()  # a new process of this broker
            found = re.search(r"broker (\d+): replica fetching from broker (\d+) "
                              r"(refused|accepted again)", line)
            if found is None:
                continue
            pair = (found[1], found[2])
            if found[3] == "refused":
                open_refusals.add(pair)
            else:
                open_refusals.discard(pair)
        assert not open_refusals, (log.name, open_refusals)


@pytest.mark.slow
def test_default_configuration_survives_every_fault(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--time-limit-s", "240", "--seed", "7",
                             timeout_s=900)
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))


def test_not_root_or_bad_arguments_one_line_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "floodmark.cli", "chaos", "run", "--faults",
                           "meteor"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unknown fault 'meteor'" in done.stderr
    if os.geteuid() == 0:
        # as an unprivileged user (nobody), the run refuses in one line
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-m", "floodmark.cli", "chaos", "run"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "HOME": str(tmp_path)})
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "needs root" in done.stderr, done.stderr


def test_power_loss_of_every_broker_at_once_is_caught(tmp_path: Path) -> None:
    """The page-cache mode really drops unsynced writes on real processes: a power cut of every
    broker at once (beyond SPEC §4's premise) loses acknowledged writes, and the checker says so.
    One broker at a time is within the premise (the slow test below)."""
    seed = 5  # plan(5, ["power-loss", "kill-all"], 12) is one kill-all, every broker's power
    assert [f.name for f in plan(seed, ["power-loss", "kill-all"], 12)] == ["kill-all"]
    code, result = chaos_run(tmp_path, "--time-limit-s", "12", "--faults", "power-loss,kill-all",
                             "--seed", str(seed), "--quiet-s", "0")
    _assert_contract(result, seed)
    assert code == 1 and not result["valid"]
    assert result["anomaly_counts"]["lost"] > 0, result["anomaly_counts"]


@pytest.mark.slow
def test_default_configuration_survives_power_loss_one_broker_at_a_time(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--time-limit-s", "60", "--faults", "power-loss,pause",
                             "--seed", "2")
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))


@pytest.mark.slow
def test_controller_quorum_under_controller_faults(tmp_path: Path) -> None:
    """Three controllers (a quorum): the active one paused, killed, cut off, and the whole
    quorum killed and restarted one by one, while the brokers keep serving."""
    code, result = chaos_run(tmp_path, "--controllers", "3", "--time-limit-s", "60",
                             "--faults", "controller,kill-leader", "--seed", "1")
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    assert any(f["name"].endswith("controller") or f["name"] == "kill-controllers"
               for f in result["faults"])
