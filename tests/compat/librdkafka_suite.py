"""librdkafka's own test suite against a floodmark cluster (issues 21 and 26).

On demand, not part of pytest's suite (a whole run takes tens of minutes):

    .venv/bin/python -m tests.compat.librdkafka_suite                      # PLAINTEXT, every broker test
    .venv/bin/python -m tests.compat.librdkafka_suite --security sasl_ssl  # SCRAM-SHA-512
    .venv/bin/python -m tests.compat.librdkafka_suite --security sasl_ssl --mechanism PLAIN
    .venv/bin/python -m tests.compat.librdkafka_suite --tests 0101          # fetch from follower

What it does, each step skipped when already done:

1. Debian packages the build needs (a C/C++ tool chain, OpenSSL, zlib, zstd, lz4, Cyrus SASL's
   headers, RapidJSON for 0101's JSON parts), installed with apt-get when missing.
2. librdkafka's source with its ``tests/``: from ``--source DIR`` (a checkout), else the npm
   package ``@confluentinc/kafka-javascript`` (``NPM_VERSION``), which carries librdkafka's
   complete source tree in ``deps/librdkafka``; unpacked under ``~/.cache/floodmark/librdkafka``.
   No registry carries the exact librdkafka of the confluent-kafka wheel (2.16.0 for
   confluent-kafka 2.16.1); the script prints both versions.
3. The library and the suite's ``test-runner``, built once (``make -j2``, no optimisation: the
   machine is small and the code under test is the broker).
4. A floodmark cluster (``floodmark.cluster.LocalCluster``: 3 brokers and a controller) shaped
   as librdkafka's own test clusters: ``num.partitions=3``, replication factor 3, broker N in
   rack ``RACKN`` with Kafka's RackAwareReplicaSelector (``--no-racks``: none; 0101 then skips
   itself). PLAINTEXT; or ``--security sasl_ssl`` (``cluster up --security sasl_ssl``: SASL_SSL
   client listeners with the admin's SCRAM-SHA-512 login, ACLs on, the admin a super user);
   with ``--mechanism PLAIN`` the client listener also takes PLAIN (a users file with the
   admin).
5. The suite's ``test.conf`` (bootstrap servers, client security, ``test.timeout.multiplier``).
6. Each selected test number in its own ``test-runner`` process (quick mode ``-Q`` unless
   ``--no-quick``, broker tests only ``-L``), at most ``--timeout-s`` each (then killed, a TIMEOUT), ``--jobs`` at a time;
   one line per test (PASSED, FAILED with librdkafka's reason, SKIPPED with why, TIMEOUT) and the
   totals. Logs and ``results.json`` stay in the run directory it names.

The broker-test set: every test of the suite's table (``tests/test.c``) that is not local
(TEST_F_LOCAL), not manual and not a known issue. ``--tests`` picks numbers from it (or any
test, manual ones included, when named explicitly).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from floodmark.cluster.local import LocalCluster
from floodmark.cluster.secure import ADMIN

NPM_PACKAGE = "@confluentinc/kafka-javascript"
NPM_VERSION = "1.10.1"
LIBRDKAFKA_VERSION = "2.15.1"
"""What NPM_VERSION bundles (its package.json's ``librdkafka``): the newest librdkafka with its
tests that a package registry carries here."""
DEBIAN_PACKAGES = ("build-essential", "pkg-config", "python3", "libssl-dev", "zlib1g-dev",
                   "libzstd-dev", "liblz4-dev", "libsasl2-dev", "rapidjson-dev")
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "floodmark" / \
    "librdkafka"
KAFKA_VERSION = "4.1.1"
"""The broker version the suite is told (TEST_KAFKA_VERSION): the Kafka floodmark answers as."""
RACK_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
TEST_USER = "testuser"
"""The suite's login on a SASL listener: no super user (ACLs apply to it)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SUMMARY_ROW = re.compile(
    r"^\|\s*(?P<name>\d{4}_\w+)\s*\|\s*(?P<state>[A-Z ]+?)\s*\|\s*(?P<secs>[\d.]+)s\s*\|"
    r"\s*(?P<reason>.*)$")
_TEST_ENTRY = re.compile(r"_TEST\(\s*(?P<name>\d{4}_\w+)\s*,\s*(?P<flags>[^,)]*)")
_SCENARIO = re.compile(r'\.scenario\s*=\s*"(?P<names>[^"]*)"')
SCENARIOS = {"default": {}, "noautocreate": {"auto.create.topics.enable": "false"}}
"""librdkafka's test scenarios (tests/scenarios/*.json) as broker settings: a test names the
scenarios it runs in (default: "default")."""
_FAILURE = re.compile(
    r'^### Test "(?P<name>\d{4}_\w+)(?: \((?P<subtest>.*)\))?" failed at (?P<where>\S+)')
SUITE_BROKER_SETTINGS = {"num.partitions": "4", "replica.lag.time.max.ms": "30000",
                         "group.initial.rebalance.delay.ms": "3000",
                         "authorizer.class.name": "org.apache.kafka.metadata.authorizer."
                                                  "StandardAuthorizer",
                         "allow.everyone.if.no.acl.found": "true"}
"""What librdkafka's own test clusters (trivup) set: tests produce to partitions 0..3 of
auto-created topics (0029); Kafka's 3 s initial rebalance delay, so consumers started together
join the first generation together (0118 counts on it); an ACL authorizer that lets everyone do what no ACL covers (0109,
0115 and 0119 add DENY ACLs with kafka-acls.sh); and Kafka's default ISR lag in place of LocalCluster's
quick 3 s (the suite is a client test, not a failover drill, on a loaded machine)."""
SUITE_CONTROLLER_SETTINGS = {"broker.session.timeout.ms": "9000"}
"""Kafka's default, in place of LocalCluster's 2 s: a broker slowed by a loaded machine is not
fenced in the middle of a client test."""


def say(line: str) -> None:
    print(line, flush=True)


# -- 1. Debian packages ------------------------------------------------------------------------
def ensure_debian_packages() -> None:
    missing = [p for p in DEBIAN_PACKAGES if not _dpkg_installed(p)]
    if shutil.which("npm") is None:
        missing.append("npm")
    if not missing:
        return
    say(f"[setup] installing Debian packages: {' '.join(missing)}")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", *missing], check=True,
                   stdout=subprocess.DEVNULL,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _dpkg_installed(package: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                          capture_output=True, text=True, check=False)
    return done.returncode == 0 and done.stdout.endswith(" installed")


# -- 2. the source -----------------------------------------------------------------------------
def source_version(src: Path) -> str:
    """librdkafka's version from its header (``RD_KAFKA_VERSION 0xMMmmrrff``)."""
    text = (src / "src" / "rdkafka.h").read_text()
    found = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", text)
    if found is None:
        raise SystemExit(f"{src}: no RD_KAFKA_VERSION in src/rdkafka.h")
    v = int(found.group(1), 16)
    return f"{v >> 24 & 0xff}.{v >> 16 & 0xff}.{v >> 8 & 0xff}"


def npm_source() -> Path:
    """librdkafka's tree out of the npm package (``deps/librdkafka``), unpacked once."""
    src = CACHE_DIR / LIBRDKAFKA_VERSION / "src"
    if (src / "tests" / "test.c").is_file():
        return src
    if shutil.which("npm") is None:
        raise SystemExit("npm is not installed (apt-get install npm), or pass --source DIR")
    src.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        say(f"[source] npm pack {NPM_PACKAGE}@{NPM_VERSION}")
        subprocess.run(["npm", "pack", "--silent", f"{NPM_PACKAGE}@{NPM_VERSION}"], cwd=tmp,
                       check=True, stdout=subprocess.DEVNULL)
        (tarball,) = Path(tmp).glob("*.tgz")
        prefix = "package/deps/librdkafka/"
        with tarfile.open(tarball) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
            if not members:
                raise SystemExit(f"{NPM_PACKAGE}@{NPM_VERSION} carries no {prefix}")
            archive.extractall(tmp, members=members, filter="data")
        shutil.move(Path(tmp) / prefix, src)
    for script in ("configure", "lds-gen.py", "tests/run-test.sh"):
        (src / script).chmod(0o755)
    if source_version(src) != LIBRDKAFKA_VERSION:
        say(f"[source] note: {NPM_PACKAGE}@{NPM_VERSION} carries librdkafka "
            f"{source_version(src)}, not {LIBRDKAFKA_VERSION}")
    return src


def wheel_version() -> str:
    try:
        import confluent_kafka
    except ImportError:
        return "(confluent-kafka not installed)"
    version: str = confluent_kafka.libversion()[0]
    return version


# -- 3. the build ------------------------------------------------------------------------------
def build(src: Path, jobs: int) -> Path:
    """The library and ``tests/test-runner``; returns the tests directory."""
    tests = src / "tests"
    if (tests / "test-runner").is_file():
        return tests
    log = src.parent / "build.log"
    say(f"[build] librdkafka in {src} (log: {log}); this takes a while")
    steps = [["./configure", "--disable-gssapi", "--disable-optimization",
              "--disable-debug-symbols"],
             ["make", f"-j{jobs}", "libs"],
             ["make", "-C", "tests", f"-j{jobs}", "build"]]
    with log.open("a") as out:
        for step in steps:
            if step[0] == "./configure" and (src / "Makefile.config").is_file():
                continue
            done = subprocess.run(step, cwd=src, stdout=out, stderr=subprocess.STDOUT,
                                  check=False)
            if done.returncode != 0:
                tail = log.read_text(errors="replace").splitlines()[-15:]
                raise SystemExit(f"[build] {' '.join(step)} failed ({done.returncode}):\n" +
                                 "\n".join(tail))
    if not (src / "Makefile.config").read_text().count("WITH_RAPIDJSON"):
        say("[build] RapidJSON not found: 0101 will skip itself")
    return tests


# -- the suite's table ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SuiteTest:
    name: str
    flags: str
    scenarios: tuple[str, ...] = ("default",)

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def broker_test(self) -> bool:
        """Needs a broker, runs unattended, and is not a known issue on Linux."""
        return not any(f in self.flags for f in ("TEST_F_LOCAL", "TEST_F_MANUAL")) and \
            self.flags.strip() != "TEST_F_KNOWN_ISSUE"


def suite_table(tests_dir: Path) -> list[SuiteTest]:
    text = (tests_dir / "test.c").read_text()
    start = text.index("struct test tests[] = {")
    block = text[start:text.index("\n};", start)]
    entries = list(_TEST_ENTRY.finditer(block))
    table = []
    for m, after in zip(entries, [*entries[1:], None], strict=True):
        text = block[m.start():after.start() if after else len(block)]
        scenario = _SCENARIO.search(text)
        table.append(SuiteTest(m.group("name"), m.group("flags").strip(),
                               tuple(scenario.group("names").split(",")) if scenario
                               else ("default",)))
    return table


def selected(table: Sequence[SuiteTest], numbers: Iterable[str] | None,
             scenario: str = "default") -> list[SuiteTest]:
    """The broker tests of ``scenario``, or the tests ``numbers`` names (those of them that
    run in ``scenario``)."""
    if numbers is None:
        return [t for t in table if t.broker_test and scenario in t.scenarios]
    wanted = set(numbers)
    return [t for t in table if t.number in wanted and "TEST_F_LOCAL" not in t.flags
            and scenario in t.scenarios]


# -- 4. the cluster ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The cluster to start and the client settings the suite's test.conf gets."""
    security: str | None
    mechanism: str
    racks: bool
    brokers: int
    scenario: str = "default"
    broker_settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Clients:
    """librdkafka settings of the two logins: ``admin`` (a super user: Kafka's tools) and
    ``tests`` (what test.conf gets: on a SASL listener the ordinary user ``TEST_USER``, as
    librdkafka's SASL clusters log the suite in as ``testuser``; on PLAINTEXT the same)."""
    admin: dict[str, str]
    tests: dict[str, str]


def start_cluster(target: Target, run_dir: Path) -> tuple[LocalCluster, Clients]:
    settings = SUITE_BROKER_SETTINGS | SCENARIOS[target.scenario] | dict(target.broker_settings)
    passwords = {ADMIN: secrets.token_urlsafe(18), TEST_USER: secrets.token_urlsafe(18)}
    if target.racks:
        settings["replica.selector.class"] = RACK_SELECTOR
    if target.security == "sasl_ssl" and target.mechanism == "PLAIN":
        users = run_dir / "plain-users"
        fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("".join(f"{user}:{password}\n" for user, password in passwords.items()))
        settings |= {"floodmark.sasl.plain.users.file": str(users),
                     "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"}
    racks = [f"RACK{n}" for n in range(1, target.brokers + 1)] if target.racks else []
    cluster = LocalCluster(run_dir / "cluster", brokers=target.brokers,
                           broker_settings=settings,
                           controller_settings=dict(SUITE_CONTROLLER_SETTINGS),
                           security=target.security, racks=racks)
    say(f"[cluster] {target.brokers} brokers, {target.security or 'PLAINTEXT'}"
        f"{' ' + target.mechanism if target.security else ''}"
        f"{', racks RACK1..' if target.racks else ''} in {cluster.data_dir}")
    cluster.start()
    admin = {"bootstrap.servers": cluster.bootstrap}
    if target.security is None:
        return cluster, Clients(admin, admin)
    props = cluster.data_dir / "client.properties"
    for line in props.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            admin[key.strip()] = value.strip()
    if target.mechanism == "PLAIN":
        admin |= {"sasl.mechanisms": "PLAIN", "sasl.password": passwords[ADMIN]}
    else:
        add_scram_user(admin, TEST_USER, passwords[TEST_USER])
    tests = admin | {"sasl.username": TEST_USER, "sasl.password": passwords[TEST_USER]}
    return cluster, Clients(admin, tests)


def add_scram_user(admin: dict[str, str], user: str, password: str) -> None:
    """``user``'s SCRAM-SHA-512 credential, made by the admin (AlterUserScramCredentials)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode())
    config: dict[str, str | int | float | bool] = dict(admin)
    client = AdminClient(config)  # held until the answer: a dropped handle fails its futures
    for future in client.alter_user_scram_credentials([upsert]).values():
        future.result(60)


# -- Kafka's tools (KAFKA_PATH) ------------------------------------------------------------------
KAFKA_TOOLS = ("kafka-topics", "kafka-acls", "kafka-configs")
"""What tests run from ``$KAFKA_PATH/bin`` (0052 and 0077 create topics with kafka-topics.sh,
0109/0115/0119 add ACLs with kafka-acls.sh)."""
REPO = Path(__file__).resolve().parents[2]


def kafka_path(run_dir: Path, client: dict[str, str]) -> Path | None:
    """A ``KAFKA_PATH`` whose ``bin/<tool>.sh`` run Apache Kafka's own tools (the jars of
    ``./dev kafka``, tests/reference/kafka_node.py) against the cluster, with the client's
    security as a Java client config; None without Java or Maven (the tests that need it then
    fail on KAFKA_PATH, as they do outside librdkafka's own clusters)."""
    from tests.reference import kafka_node

    reason = kafka_node.missing_reason()
    if reason is not None:
        say(f"[kafka tools] none: {reason}")
        return None
    kafka_node.fetch_jars()
    home = run_dir / "kafka"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    command_config = ""
    if client.get("security.protocol", "PLAINTEXT") != "PLAINTEXT":
        config = home / "client.properties"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(f"{k}={v}" for k, v in java_client_security(client).items())
                      + "\n")
        command_config = f" --command-config '{config}'"
    # libs/ and kafka-run-class.sh: the suite's Java helpers (tests/java, 0098's transactional
    # producer) build against kafka-clients and run with Kafka's jars
    libs = home / "libs"
    if not libs.exists():
        libs.symlink_to(kafka_node.LIB)
    run_class = home / "bin" / "kafka-run-class.sh"
    run_class.write_text(
        "#!/bin/sh\n# tests/compat/librdkafka_suite.py: a class with Apache Kafka's jars\n"
        f"exec java -Xmx512m -Dlog4j2.configurationFile='{kafka_node.KAFKA_DIR}/"
        f"log4j2-tools.properties' -cp \"${{CLASSPATH:+$CLASSPATH:}}{kafka_node.LIB}/*\" \"$@\"\n")
    run_class.chmod(0o755)
    for tool in KAFKA_TOOLS:
        script = home / "bin" / f"{tool}.sh"
        script.write_text(
            "#!/bin/sh\n# tests/compat/librdkafka_suite.py: Apache Kafka's own tool on floodmark\n"
            f"cd '{REPO}' && PYTHONPATH='{REPO / 'src'}' exec '{sys.executable}' -m "
            f"tests.reference.kafka_node tool {tool} \"$@\"{command_config}\n")
        script.chmod(0o755)
    return home


def java_client_security(client: dict[str, str]) -> dict[str, str]:
    """librdkafka's security settings in the Java client's names."""
    mechanism = client["sasl.mechanisms"]
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {"security.protocol": client["security.protocol"], "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{client["sasl.username"]}" '
                                f'password="{client["sasl.password"]}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": client["ssl.ca.location"]}


# -- 5. test.conf --------------------------------------------------------------------------------
def write_test_conf(path: Path, client: dict[str, str], timeout_multiplier: float) -> None:
    lines = ["# written by tests/compat/librdkafka_suite.py",
             f"test.timeout.multiplier={timeout_multiplier}",
             *(f"{k}={v}" for k, v in client.items())]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold a password
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")


# -- 6. running ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    name: str
    state: str  # PASSED, FAILED, SKIPPED, TIMEOUT, CRASHED
    seconds: float
    reason: str
    log: str


_running: set[int] = set()
"""Process groups of the test-runners running now (killed when the run is interrupted)."""


def run_number(tests_dir: Path, number: str, names: Sequence[str], conf: Path, logs: Path,
               timeout_s: float, extra_args: Sequence[str],
               extra_env: dict[str, str]) -> list[Outcome]:
    """One ``test-runner`` process for the tests of one number (0045 has five); ``extra_env``
    includes CI=true or not (librdkafka's CI mode)."""
    log = logs / f"{number}.log"
    own_conf = conf.with_name(f"test-{number}.conf")  # its own topic prefix: -D (delete the
    shutil.copy(conf, own_conf)                        # test topics at the end) deletes only
    with own_conf.open("a") as out:                    # this process's
        out.write(f"test.topic.prefix=rdkafkatest{number}\n")
    env = {**os.environ, **extra_env, "TESTS": number, "RDKAFKA_TEST_CONF": str(own_conf),
           "TEST_KAFKA_VERSION": extra_env.get("TEST_KAFKA_VERSION", KAFKA_VERSION),
           "LD_LIBRARY_PATH": f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"}
    if not env.get("CI"):
        env.pop("CI", None)  # test-runner takes any CI, even empty, for its CI mode
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(["./test-runner", "-L", *extra_args], cwd=tests_dir,
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        _running.add(proc.pid)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        finally:
            _running.discard(proc.pid)
    elapsed = time.monotonic() - started
    lines = [_ANSI.sub("", line).rstrip()
             for line in log.read_text(errors="replace").splitlines()]
    rows = {m.group("name"): m for m in map(_SUMMARY_ROW.match, lines) if m}
    failures: dict[str, str] = {}  # test -> where and why (a failed test aborts test-runner
    for i, line in enumerate(lines):  # before its summary)
        failed = _FAILURE.match(line)
        if failed and failed.group("name") not in failures:
            why = lines[i + 1] if i + 1 < len(lines) else ""
            sub = failed.group("subtest")
            failures[failed.group("name")] = \
                f"{failed.group('where')}{f' ({sub})' if sub else ''}: {why}"
    outcomes = []
    for name in names:
        row = rows.get(name)
        if name in failures:
            outcomes.append(Outcome(name, "FAILED", elapsed, failures[name], str(log)))
        elif code is None:
            outcomes.append(Outcome(name, "TIMEOUT", elapsed,
                                    f"killed after {timeout_s:.0f} s", str(log)))
        elif row is None and code == 0:  # skipped silently (a scenario, test flags)
            outcomes.append(Outcome(name, "SKIPPED", elapsed, "not run by test-runner",
                                    str(log)))
        elif row is None:
            outcomes.append(Outcome(name, "CRASHED", elapsed,
                                    f"test-runner exited {code} without a summary", str(log)))
        else:
            state = row.group("state")
            if state not in ("PASSED", "FAILED", "SKIPPED"):
                state = "FAILED"
            outcomes.append(Outcome(name, state, elapsed, row.group("reason").strip(),
                                    str(log)))
    return outcomes


def run_suite(tests_dir: Path, chosen: Sequence[SuiteTest], conf: Path, logs: Path,
              timeout_s: float, jobs: int, extra_args: Sequence[str],
              extra_env: dict[str, str]) -> list[Outcome]:
    by_number: dict[str, list[str]] = {}
    for t in chosen:
        by_number.setdefault(t.number, []).append(t.name)
    results: list[Outcome] = []
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(run_number, tests_dir, number, names, conf, logs, timeout_s,
                               extra_args, extra_env) for number, names in by_number.items()]
        for future in futures:
            for o in future.result():
                results.append(o)
                tail = f"  {o.reason}" if o.reason and o.state != "PASSED" else ""
                say(f"{o.name:<44} {o.state:<8} {o.seconds:8.1f}s{tail[:300]}")
    except KeyboardInterrupt:  # SIGINT, or SIGTERM (main): no new test, the running ones end
        pool.shutdown(wait=False, cancel_futures=True)
        for pgid in list(_running):
            os.killpg(pgid, signal.SIGKILL)
        raise
    pool.shutdown()
    return results


def totals(results: Sequence[Outcome]) -> dict[str, int]:
    count = {s: 0 for s in ("PASSED", "FAILED", "TIMEOUT", "CRASHED", "SKIPPED")}
    for o in results:
        count[o.state] += 1
    return count


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.compat.librdkafka_suite",
        description="Build librdkafka's test suite and run it against a floodmark cluster: "
                    "pass/fail per test and the totals.")
    p.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                   help="the client listeners: PLAINTEXT, or SASL_SSL as `cluster up "
                        "--security sasl_ssl` makes them (TLS with the cluster's CA, SASL, "
                        "ACLs on, the tests log in as the super user admin)")
    p.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512",
                   help="with sasl_ssl: the SASL mechanism the tests log in with")
    p.add_argument("--no-racks", dest="racks", action="store_false",
                   help="brokers without racks (by default broker N is in rack RACKN with "
                        "Kafka's RackAwareReplicaSelector, as in librdkafka's own test "
                        "clusters; 0101 fetch-from-follower skips itself without them)")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="one more broker setting (repeatable), e.g. "
                        "connections.max.reauth.ms=10000 for 0142 (re-authentication)")
    p.add_argument("--kafka-version", default=KAFKA_VERSION,
                   help="the broker version the suite is told (TEST_KAFKA_VERSION); tests "
                        "for a later Kafka skip themselves (the share consumer's want 4.2)")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="default",
                   help="librdkafka's test scenario: noautocreate runs its 4 tests on brokers "
                        "with auto.create.topics.enable=false")
    p.add_argument("--tests", default=None,
                   help="comma-separated test numbers (0001,0101); default: every broker test")
    p.add_argument("--skip", default="", help="comma-separated test numbers to leave out")
    p.add_argument("--timeout-s", type=float, default=600.0,
                   help="a test-runner process killed after this long (a TIMEOUT; 0081_admin "
                        "alone runs about 300 s here, over PLAINTEXT and over SASL_SSL)")
    p.add_argument("--timeout-multiplier", type=float, default=2.0,
                   help="test.timeout.multiplier: the suite's own timeouts scaled for a small "
                        "shared machine")
    p.add_argument("--jobs", type=int, default=2, help="test numbers run at once")
    p.add_argument("--build-jobs", type=int, default=2, help="make -jN")
    p.add_argument("--source", type=Path, default=None,
                   help="a librdkafka source tree (with tests/) instead of the npm package's")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="logs, test.conf, results.json and the cluster (default: under "
                        f"{CACHE_DIR}/runs)")
    p.add_argument("--no-quick", action="store_true",
                   help="the suite's full mode (no -Q): every subtest, more data; the "
                        "share-consumer tests (0170-0185) have no quick subtests at all")
    p.add_argument("--no-sockem", action="store_true",
                   help="leave out the socket-emulation tests (test-runner -E)")
    p.add_argument("--no-kafka-tools", dest="kafka_tools", action="store_false",
                   help="no KAFKA_PATH (by default its bin/ runs Apache Kafka's own "
                        "kafka-topics/kafka-acls/kafka-configs from ./dev kafka's jars)")
    p.add_argument("--keep-topics", dest="delete_topics", action="store_false",
                   help="keep every test's topics (by default each test-runner deletes its "
                        "own, test-runner -D: a run creates thousands of partitions, more than "
                        "three Python brokers on a shared 2-core machine keep healthy)")
    p.add_argument("--strict-timing", action="store_true",
                   help="fail tests on their timing windows (by default the suite runs in "
                        "librdkafka's CI mode, as its own CI does: a timing window missed is "
                        "a warning, timeouts +2x, 0055's latency check skipped; this machine "
                        "is shared and loaded)")
    p.add_argument("--build-only", action="store_true", help="get and build, run nothing")
    p.add_argument("--keep-cluster-data", action="store_true")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)

    ensure_debian_packages()
    src = args.source.resolve() if args.source else npm_source()
    say(f"[source] librdkafka {source_version(src)} at {src}; the installed confluent-kafka "
        f"wheel bundles librdkafka {wheel_version()}")
    tests_dir = build(src, args.build_jobs)
    if args.build_only:
        return 0
    table = suite_table(tests_dir)
    numbers = args.tests.split(",") if args.tests else None
    skip = set(filter(None, args.skip.split(",")))
    chosen = [t for t in selected(table, numbers, args.scenario) if t.number not in skip]
    if not chosen:
        raise SystemExit(f"no test of the suite matches --tests {args.tests}")

    security = None if args.security == "plaintext" else args.security
    label = f"{args.security}{'-' + args.mechanism.lower() if security else ''}" \
            f"{'' if args.racks else '-no-racks'}" \
            f"{'' if args.scenario == 'default' else '-' + args.scenario}"
    run_dir = (args.run_dir or CACHE_DIR / "runs" /
               f"{time.strftime('%Y%m%dT%H%M%S')}-{label}").resolve()
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    sets = tuple((name, value) for name, _, value in (s.partition("=") for s in args.set))
    target = Target(security, args.mechanism, args.racks, args.brokers, args.scenario, sets)
    started = time.monotonic()
    cluster, clients = start_cluster(target, run_dir)
    try:
        conf = run_dir / "test.conf"
        write_test_conf(conf, clients.tests, args.timeout_multiplier)
        extra_env = {"BROKERS": cluster.bootstrap, "TEST_SCENARIO": args.scenario,
                     "TEST_KAFKA_VERSION": args.kafka_version}
        extra_env["CI"] = "" if args.strict_timing else "true"
        home = kafka_path(run_dir, clients.admin) if args.kafka_tools else None
        if home is not None:
            extra_env["KAFKA_PATH"] = str(home)
        say(f"[suite] {len(chosen)} tests, {args.jobs} at a time, at most {args.timeout_s:.0f} "
            f"s each; logs in {logs}")
        runner_args = [*([] if args.no_quick else ["-Q"]), *(["-E"] if args.no_sockem else []),
                       *(["-D"] if args.delete_topics else [])]
        results = run_suite(tests_dir, chosen, conf, logs, args.timeout_s, args.jobs,
                            runner_args, extra_env)
    finally:
        cluster.stop()
        for node in cluster.node_ids:  # the nodes' logs stay with the run's
            if cluster.log_path(node).is_file():
                shutil.copy(cluster.log_path(node), logs / f"node-{node}.log")
        if not args.keep_cluster_data:
            shutil.rmtree(cluster.data_dir, ignore_errors=True)
    wall_s = time.monotonic() - started
    count = totals(results)
    ran = len(results) - count["SKIPPED"]
    (run_dir / "results.json").write_text(json.dumps({
        "librdkafka": source_version(src), "target": asdict(target), "wall_s": round(wall_s),
        "totals": count, "tests": [asdict(o) for o in results]}, indent=1))
    failed = count["FAILED"] + count["TIMEOUT"] + count["CRASHED"]
    say(f"[suite] {label}: {count['PASSED']} of {ran} run passed ({count['FAILED']} failed, "
        f"{count['TIMEOUT']} timed out, {count['CRASHED']} crashed), {count['SKIPPED']} "
        f"skipped by the suite, in {wall_s / 60:.1f} min; {run_dir / 'results.json'}")
    say(f"librdkafka suite: {count['PASSED']} passed, {failed} failed, "
        f"{count['SKIPPED']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
