"""Where OAUTHBEARER's trusted keys come from: ``sasl.oauthbearer.jwks.endpoint.url``.

A file (a path or a ``file://`` URL) is read at start and again whenever its modification time
changes (checked when a client authenticates), so rotating keys is replacing the file. An
``http(s)://`` URL is fetched at start and then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``
by a background thread. A key set that cannot be read at start stops the broker with one line;
one that cannot be re-read later keeps the keys it had and logs one line.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
from pathlib import Path

from floodmark.security.sasl.oauthbearer import JsonWebKey, parse_jwks

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MAX_DOCUMENT_BYTES = 1 << 20


class KeySet:
    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self._refresh_s = max(1.0, refresh_ms / 1000)
        parsed = urllib.parse.urlparse(url)
        self._remote = parsed.scheme in ("http", "https")
        if parsed.scheme == "file":
            self._path: Path | None = Path(urllib.parse.unquote(parsed.path))
        elif self._remote:
            self._path = None
        elif parsed.scheme in ("", ) or len(parsed.scheme) == 1:  # a path (or C:\\ on Windows)
            self._path = Path(url)
        else:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={url}: a file path, file:// "
                             f"or http(s):// URL")
        self._mtime_ns = -1
        self._keys: tuple[JsonWebKey, ...] = self._load()
        self._stop = threading.Event()
        if self._remote:
            threading.Thread(target=self._refresh_loop, name="jwks-refresh",
                             daemon=True).start()

    def keys(self) -> tuple[JsonWebKey, ...]:
        if self._path is not None:
            try:
                mtime_ns = os.stat(self._path).st_mtime_ns
            except OSError as exc:
                log.warning("OAUTHBEARER key set %s: %s; keeping the keys read before",
                            self._path, exc.strerror or exc)
                return self._keys
            if mtime_ns != self._mtime_ns:
                try:
                    self._keys = self._load()
                    log.info("OAUTHBEARER key set %s re-read: %d key(s)", self._path,
                             len(self._keys))
                except ValueError as exc:
                    self._mtime_ns = mtime_ns  # do not retry the same broken file each time
                    log.warning("%s; keeping the keys read before", exc)
        return self._keys

    def close(self) -> None:
        self._stop.set()

    def _load(self) -> tuple[JsonWebKey, ...]:
        if self._path is not None:
            try:
                self._mtime_ns = os.stat(self._path).st_mtime_ns
                text = self._path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={self.url}: "
                                 f"{exc.strerror or exc}") from None
            except UnicodeDecodeError:
                raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={self.url}: not UTF-8 "
                                 "text") from None
            return parse_jwks(text, f"sasl.oauthbearer.jwks.endpoint.url={self.url}")
        import urllib.request  # http.client, email, ...: only a broker with a JWKS URL loads them

        try:
            with urllib.request.urlopen(self.url, timeout=FETCH_TIMEOUT_S) as resp:
                body = resp.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={self.url}: {exc}") from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={self.url}: the key set is "
                             f"over {MAX_DOCUMENT_BYTES} bytes")
        return parse_jwks(body.decode("utf-8", "replace"),
                          f"sasl.oauthbearer.jwks.endpoint.url={self.url}")

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self._refresh_s):
            try:
                self._keys = self._load()
            except ValueError as exc:
                log.warning("%s; keeping the keys fetched before", exc)
