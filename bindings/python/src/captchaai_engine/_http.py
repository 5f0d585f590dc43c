"""The HTTP transport of the httpx.AsyncClient an AsyncSolver makes for itself.

httpx's default async transport (httpcore's AsyncConnectionPool) rescans every connection, and
polls each idle one's socket, on every request it queues or finishes, and hands one idle HTTP/1.1
connection to several waiting requests, which then retry (ConnectionNotAvailable). With many
solves in flight that costs about 4-5 ms of CPU per request at 100 connections on the 2-core test
machine; with this transport 1,000 solves in flight took 6.5 ms of CPU per solve instead of 16.8
(benches/async_scale.py). The solver never has more than ``solver.HTTP_CONNECTIONS`` requests out (its own
semaphore), so this transport needs no queue: it takes the most recently used idle connection to
the origin (checked for expiry and a server close) or opens one, and keeps it again when the
response is closed. Only public httpx and httpcore APIs are used; proxies from the environment
still go through the client's own proxy transports.
"""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import httpx

#: httpcore's exceptions as httpx's own transport maps them, most specific first.
_EXCEPTIONS: tuple[tuple[type, type], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _mapped() -> Any:
    try:
        yield
    except Exception as error:
        for core, mapped in _EXCEPTIONS:
            if isinstance(error, core):
                raise mapped(str(error)) from error
        raise


class _Stream(httpx.AsyncByteStream):
    """A response body; closing it gives the connection back."""

    __slots__ = ("_stream", "_release")

    def __init__(self, stream: Any, release: Any) -> None:
        self._stream = stream
        self._release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        try:
            with _mapped():
                await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                await release()


class PooledTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 connections per origin, one request on each at a time; up to ``max_idle`` per
    origin are kept alive, each for ``keepalive_expiry`` seconds."""

    def __init__(self, max_idle: int, keepalive_expiry: float = 5.0) -> None:
        self._ssl_context = httpx.create_ssl_context()
        self._max_idle = max_idle
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[Any, list[httpcore.AsyncHTTPConnection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port)
        idle = self._idle.get(origin)
        connection = None
        while idle:
            candidate = idle.pop()
            if candidate.is_idle() and not candidate.has_expired():
                connection = candidate
                break
            await candidate.aclose()
        if connection is None:
            connection = httpcore.AsyncHTTPConnection(
                httpcore.Origin(url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80)),
                ssl_context=self._ssl_context, keepalive_expiry=self._keepalive_expiry)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        try:
            with _mapped():
                response = await connection.handle_async_request(core_request)
        except BaseException:
            await connection.aclose()
            raise

        async def release() -> None:
            idle = self._idle.setdefault(origin, [])
            if not self._closed and connection.is_idle() and len(idle) < self._max_idle:
                idle.append(connection)
            else:
                await connection.aclose()

        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Stream(response.stream, release), extensions=response.extensions)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.aclose()
