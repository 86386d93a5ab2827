"""The dashboard's web server (aiohttp): a poller, the JSON API, server-sent events, the page.

One task polls the cluster while anyone watches (``source.collect`` in a worker thread, so a
slow broker never blocks the event loop) and keeps the latest snapshot. Every browser holds one
``GET /api/events?topic=T&partition=P`` stream and receives the whole snapshot each time it
changes.

What the polling costs the brokers: only the partitions on somebody's screen (the union of the
open streams' ``topic``/``partition``; a stream without them, or the JSON API, reads every
partition) have their replicas asked; consumer groups and the leaders' high watermarks are
read every ``SLOW_EVERY`` refreshes; and the pause between refreshes starts at ``interval_ms``
and doubles while nothing changes, up to ``MAX_BACKOFF`` times it; each change halves it
(down to ``interval_ms``), a new stream or another partition picked sets it back to
``interval_ms`` at once. ``benchmarks/ui_polling.py``
measures it.

Routes: ``/`` (the page), ``/static/*``, ``GET /api/partitions``, ``/api/topics``,
``/api/cluster``, ``/api/groups``, ``/api/snapshot`` (all of them), ``/api/events`` (text/event-stream)
``GET /api/messages?topic=T&partition=P[&offset=N|&timestamp_ms=TS][&limit=N][&key=TEXT]``
(the message browser, ``ui.messages``),
``/api/scenarios`` and ``/api/scenarios/NAME?truncation=MODE`` (the simulator's reference
scenarios, step by step, in the same partition shape), ``GET /api/configs?type=topic|broker&name=N``
(every config with its source, ``ui.admin``) and the changes, served only with
``--allow-changes`` and only as same-origin POSTs (``ui.guard``): ``POST /api/topics/create``,
``/api/topics/delete``, ``/api/groups/reset-offsets`` and, for a local cluster,
``/api/drill {"broker": ID, "action": "kill|pause|resume|start"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from aiohttp import web

from floodmark.address import parse_host_port
from floodmark.client import FetchClient, FetchError, RequestFailed
from floodmark.errors import ErrorCode
from floodmark.ui import admin
from floodmark.ui.access import REALM, Access
from floodmark.ui.guard import ChangeGuard, own_hosts
from floodmark.ui.messages import BadQuery, browse, parse_query
from floodmark.ui.scenarios import scenario_list, scenario_steps
from floodmark.ui.source import LocalClusterSource, PartitionKey, Source, collect
from floodmark.ui.topic_stats import STAT_KEYS, TopicStats

log = logging.getLogger("floodmark.ui")

DEFAULT_PORT = 8080  # --listen HOST alone
KEEPALIVE_S = 15.0
# Nobody watching (no event stream open, no API call for this long): stop polling the cluster.
IDLE_AFTER_S = 30.0
SLOW_EVERY = 4  # consumer groups and every leader's HW: once every this many refreshes
MAX_BACKOFF = 8  # nothing changes: the pause doubles up to this many times interval_ms
BROWSE_TIMEOUT_MS = 5000
DRILL_HEADER = "X-Floodmark-Drill"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html",
                ".svg": "image/svg+xml"}


def next_pause_s(pause_s: float, interval_s: float, changed: bool) -> float:
    """The pause before the next refresh: halved (down to the interval) after a change,
    doubled (up to ``MAX_BACKOFF`` intervals) after a refresh that changed nothing."""
    if changed:
        return max(interval_s, pause_s / 2)
    return min(pause_s * 2, interval_s * MAX_BACKOFF)


def _without_stats(snap: dict[str, Any]) -> dict[str, Any]:
    out = dict(snap)
    out["topics"] = [{k: v for k, v in t.items() if k not in STAT_KEYS}
                     for t in snap.get("topics") or []]
    return out


class Dashboard:
    """The latest snapshot of the cluster and the browsers waiting for the next one."""

    def __init__(self, source: Source, interval_ms: int = 500,
                 allow_changes: bool = False) -> None:
        self.source = source
        self.allow_changes = allow_changes  # --allow-changes: the guarded routes answer
        self.stats = TopicStats()
        self.interval_s = interval_ms / 1000
        self.pause_s = self.interval_s  # grows while nothing changes
        self.snapshot: dict[str, Any] | None = None
        self.version = 0
        self.refreshes = 0
        self.changed = asyncio.Condition()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="floodmark-ui")
        self._task: asyncio.Task[None] | None = None
        self.watchers = 0  # open event streams
        self.focuses: list[frozenset[PartitionKey] | None] = []  # one per open stream
        self._last_request = 0.0
        self._woken = asyncio.Event()
        self._reader: FetchClient | None = None

    def focus(self) -> frozenset[PartitionKey] | None:
        """The partitions the open streams show (None: every partition)."""
        if not self.focuses or any(f is None for f in self.focuses):
            return None
        return frozenset().union(*(f for f in self.focuses if f is not None))

    def covers(self, focus: frozenset[PartitionKey] | None) -> bool:
        """Does the latest snapshot hold the replicas of ``focus``?"""
        if self.snapshot is None:
            return False
        held = self.snapshot.get("focus")
        if held is None:
            return True
        return focus is not None and focus <= {(str(t), int(p)) for t, p in held}

    async def refresh(self, full: bool = False) -> bool:
        """Read the cluster and send a changed snapshot to the streams; True when it changed
        beyond the topics' sizes and rates (what the poller's pause follows)."""
        focus = None if full else self.focus()
        slow = full or self.snapshot is None or self.refreshes % SLOW_EVERY == 0 or bool(
            self.snapshot.get("error"))
        self.refreshes += 1
        try:
            snap = await asyncio.get_running_loop().run_in_executor(
                self._pool, collect, self.source, self._pool, focus,
                None if slow else self.snapshot, self.stats)
            snap["error"] = None
            snap["allow_changes"] = self.allow_changes
        except Exception as exc:  # the cluster is down or unreachable: say so on the page
            log.warning("refresh failed: %s", exc)
            snap = dict(self.snapshot or {"cluster": None, "topics": [], "partitions": [],
                                          "groups": [], "focus": None})
            snap["error"] = f"{type(exc).__name__}: {exc}"
            snap["allow_changes"] = self.allow_changes
        old = dict(self.snapshot or {})
        new = dict(snap)
        old.pop("time_ms", None)
        new.pop("time_ms", None)
        if old == new and self.snapshot is not None:
            return False
        async with self.changed:
            self.snapshot = snap
            self.version += 1
            self.changed.notify_all()
        # Sizes and rates alone (they settle one slow refresh after the records stop) are sent
        # but do not count as a change for the pause: they would keep a quiet cluster polled.
        return _without_stats(old) != _without_stats(new)

    def _idle(self) -> bool:
        loop = asyncio.get_running_loop()
        return self.watchers == 0 and loop.time() - self._last_request > IDLE_AFTER_S

    def touch(self) -> None:
        """Someone is looking: keep (or start again) polling the cluster."""
        was_idle = self._idle()
        self._last_request = asyncio.get_running_loop().time()
        if was_idle:
            self._woken.set()

    def nudge(self) -> None:
        """A new stream or another partition picked: refresh now, at the base interval."""
        self.pause_s = self.interval_s
        self._last_request = asyncio.get_running_loop().time()
        self._woken.set()

    async def _poll(self) -> None:
        while True:
            if self._idle():
                self._woken.clear()
                await self._woken.wait()
            changed = await self.refresh()
            self.pause_s = next_pause_s(self.pause_s, self.interval_s, changed)
            self._woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.pause_s)

    def reader(self) -> FetchClient:
        """The message browser's consumer client (one, shared; it serializes its requests)."""
        if self._reader is None:
            self._reader = FetchClient(self.source.bootstrap(), client_id="floodmark-ui",
                                       request_timeout_ms=BROWSE_TIMEOUT_MS)
        return self._reader

    async def messages(self, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """``GET /api/messages``: (HTTP status, answer). A bad query or an unreadable partition
        is one line in the answer and in the log, never a traceback."""
        try:
            query = parse_query(params)
        except BadQuery as exc:
            return 400, {"error": str(exc)}
        try:
            answer = await asyncio.get_running_loop().run_in_executor(
                self._pool, lambda: browse(self.reader(), query))
        except FetchError as exc:
            log.warning("message browser: %s", exc)
            status = 404 if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 502
            return status, {"error": str(exc)}
        except (RequestFailed, OSError, ValueError) as exc:
            log.warning("message browser: %s-%s: %s", query.topic, query.partition, exc)
            return 502, {"error": f"{type(exc).__name__}: {exc}"}
        return 200, answer

    async def start(self, app: web.Application) -> None:
        self._task = asyncio.create_task(self._poll())

    async def stop(self, app: web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._reader is not None:
            self._reader.close()

    async def current(self, full: bool = False) -> dict[str, Any]:
        """The latest snapshot, read now if it is stale (nobody watched) or, for ``full``,
        if it holds only the partitions on screen."""
        stale = self._idle()
        self.touch()
        if self.snapshot is None or stale or (full and not self.covers(None)):
            await self.refresh(full=full)
        assert self.snapshot is not None
        return self.snapshot

    async def wait_newer(self, version: int, timeout_s: float) -> bool:
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: self.version > version),
                                       timeout_s)
            except TimeoutError:
                return False
        return True


def _static(name: str) -> bytes:
    return resources.files("floodmark.ui").joinpath("static", name).read_bytes()


def build_app(dashboard: Dashboard, guard: ChangeGuard | None = None) -> web.Application:
    """``guard``: who may change the cluster (None: nobody; ``serve`` makes it from the
    dashboard's ``allow_changes`` and its own address)."""
    app = web.Application()
    guard = guard or ChangeGuard(False, frozenset())
    app.on_startup.append(dashboard.start)
    app.on_cleanup.append(dashboard.stop)

    async def index(request: web.Request) -> web.Response:
        return web.Response(body=_static("index.html"), content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        suffix = name[name.rfind("."):]
        if "/" in name or suffix not in STATIC_TYPES:
            raise web.HTTPNotFound()
        try:
            body = _static(name)
        except FileNotFoundError:
            raise web.HTTPNotFound() from None
        return web.Response(body=body, content_type=STATIC_TYPES[suffix],
                            headers={"Cache-Control": "no-cache"})

    def part(key: str) -> Any:
        full = key in ("partitions", "")  # every partition's replicas, not only those on screen

        async def handler(request: web.Request) -> web.Response:
            snap = await dashboard.current(full)
            return web.json_response(snap[key] if key else snap)
        return handler

    async def messages(request: web.Request) -> web.Response:
        status, answer = await dashboard.messages(dict(request.query))
        return web.json_response(answer, status=status)

    async def events(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        version = -1
        focus: frozenset[PartitionKey] | None = None
        if "topic" in request.query:
            try:
                focus = frozenset({(request.query["topic"],
                                    int(request.query.get("partition", "0")))})
            except ValueError:
                raise web.HTTPBadRequest(text="partition must be an integer") from None
        await resp.prepare(request)
        dashboard.watchers += 1
        dashboard.focuses.append(focus)
        dashboard.nudge()
        try:
            await dashboard.current()
            if not dashboard.covers(focus):
                await dashboard.refresh()
            while True:
                if dashboard.version > version and dashboard.snapshot is not None:
                    version = dashboard.version
                    data = json.dumps(dashboard.snapshot, separators=(",", ":"))
                    await resp.write(f"id: {version}\nevent: snapshot\ndata: {data}\n\n".encode())
                elif not await dashboard.wait_newer(version, KEEPALIVE_S):
                    await resp.write(b": keepalive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            dashboard.watchers -= 1
            dashboard.focuses.remove(focus)
        return resp

    async def guarded_body(request: web.Request) -> dict[str, Any] | web.Response:
        """The JSON body of a change, or the 403/400 answer (one line) refusing it."""
        refusal = guard.refusal(request.method, request.headers)
        if refusal is not None:
            log.warning("refused %s %s: %s", request.method, request.path, refusal)
            return web.json_response({"ok": False, "error": refusal}, status=403)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return web.json_response({"ok": False, "error": "the body must be a JSON object"},
                                     status=400)
        return body

    async def drill(request: web.Request) -> web.Response:
        """Fault drills for a local cluster (``--data-dir`` only), guarded as every change;
        the custom header stays (a cross-site page cannot send it without a CORS preflight)."""
        body = await guarded_body(request)
        if isinstance(body, web.Response):
            return body
        if not isinstance(dashboard.source, LocalClusterSource):
            return web.json_response(
                {"ok": False, "error": "fault drills need --data-dir (a local cluster)"},
                status=403)
        if request.headers.get(DRILL_HEADER) != "1":
            return web.json_response({"ok": False, "error": f"missing header {DRILL_HEADER}: 1"},
                                     status=403)
        try:
            message = await asyncio.get_running_loop().run_in_executor(
                None, dashboard.source.drill, int(body["broker"]), str(body["action"]))
        except (KeyError, ValueError, RuntimeError) as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        log.warning("fault drill: %s", message)
        await dashboard.refresh()
        return web.json_response({"ok": True, "message": message})

    def change(call: Callable[[str, dict[str, Any]], Any]) -> Any:
        """A guarded change through ``ui.admin``: 200 ``{"ok": true, ...}`` or one line."""
        async def handler(request: web.Request) -> web.Response:
            body = await guarded_body(request)
            if isinstance(body, web.Response):
                return body
            try:
                answer = await asyncio.get_running_loop().run_in_executor(
                    dashboard._pool, call, dashboard.source.bootstrap(), body)
            except admin.AdminError as exc:
                log.warning("%s: %s", request.path, exc)
                return web.json_response({"ok": False, "error": str(exc)}, status=exc.status)
            except (OSError, RuntimeError) as exc:
                log.warning("%s: %s", request.path, exc)
                return web.json_response({"ok": False, "error": f"{type(exc).__name__}: {exc}"},
                                         status=502)
            log.warning("change: %s %s", request.path,
                        answer if isinstance(answer, str) else
                        f"group {answer['group']}, {len(answer['plan'])} partition(s), "
                        f"executed={answer['executed']}")
            out = {"ok": True, "message": answer} if isinstance(answer, str) else {
                "ok": True, **answer}
            dashboard.nudge()
            return web.json_response(out)
        return handler

    async def refuse_get(request: web.Request) -> web.Response:
        refusal = guard.refusal(request.method, request.headers) or "use POST"
        return web.json_response({"ok": False, "error": refusal}, status=403 if not
                                 guard.allow_changes else 405)

    async def configs(request: web.Request) -> web.Response:
        dashboard.touch()
        try:
            answer = await asyncio.get_running_loop().run_in_executor(
                dashboard._pool, admin.configs, dashboard.source.bootstrap(),
                request.query.get("type", ""), request.query.get("name", ""))
        except admin.AdminError as exc:
            log.warning("configs: %s", exc)
            return web.json_response({"error": str(exc)}, status=exc.status)
        except (OSError, RuntimeError) as exc:
            log.warning("configs: %s", exc)
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=502)
        return web.json_response(answer)

    async def scenarios(request: web.Request) -> web.Response:
        return web.json_response(scenario_list())

    async def scenario(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        mode = request.query.get("truncation", scenario_list()["default_truncation"])
        try:
            steps = await asyncio.get_running_loop().run_in_executor(
                None, scenario_steps, name, mode)
        except (KeyError, ValueError) as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        return web.json_response(steps)

    app.router.add_get("/", index)
    app.router.add_get("/api/scenarios", scenarios)
    app.router.add_get("/api/scenarios/{name}", scenario)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/partitions", part("partitions"))
    app.router.add_get("/api/topics", part("topics"))
    app.router.add_get("/api/cluster", part("cluster"))
    app.router.add_get("/api/groups", part("groups"))
    app.router.add_get("/api/snapshot", part(""))
    app.router.add_get("/api/events", events)
    app.router.add_get("/api/messages", messages)
    app.router.add_get("/api/configs", configs)
    changes = {"/api/drill": drill,
               "/api/topics/create": change(admin.create_topic),
               "/api/topics/delete": change(admin.delete_topic),
               "/api/groups/reset-offsets": change(admin.reset_offsets)}
    for path, handler in changes.items():
        app.router.add_post(path, handler)
        app.router.add_get(path, refuse_get)
    return app


def _password_middleware(access: Access) -> Any:
    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        if access.allowed(request.headers.get("Authorization")):
            response: web.StreamResponse = await handler(request)
            return response
        return web.Response(status=401, text="a password is needed: HTTP Basic\n",
                            headers={"WWW-Authenticate": f'Basic realm="{REALM}"'})
    return check


def bind(listen: str) -> socket.socket:
    """A socket bound to ``listen`` (HOST:PORT; HOST alone: port 8080). BadAddress, OSError."""
    host, port = parse_host_port(listen, DEFAULT_PORT, what="--listen")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def serve(dashboard: Dashboard, sock: socket.socket, stop: asyncio.Event,
                ready: Callable[[], None] | None = None, *,
                tls: ssl.SSLContext | None = None, access: Access | None = None) -> None:
    """Serve on ``sock`` until ``stop`` is set; ``ready()`` once connections are accepted.
    ``tls``: serve HTTPS; ``access``: the password every request must carry (``ui.access``)."""
    host, port = sock.getsockname()[:2]
    guard = ChangeGuard(dashboard.allow_changes, own_hosts(host, port),
                        "https" if tls is not None else "http")
    app = build_app(dashboard, guard)
    if access is not None and access.password is not None:
        app.middlewares.insert(0, _password_middleware(access))
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.SockSite(runner, sock, shutdown_timeout=1.0, ssl_context=tls)
    await site.start()
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
