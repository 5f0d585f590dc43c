"""The AsyncSolver's own transport (_http.PooledTransport): keep-alive reuse per origin, at most
``max_idle`` idle connections kept, httpcore's errors raised as httpx's, closed on aclose."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from captchaai_engine._http import PooledTransport


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = str(self.client_address[1]).encode()  # the client's port: which connection
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def ports(base: str, sequential: int, concurrent: int, max_idle: int = 4) -> list[list[str]]:
    async def run() -> list[list[str]]:
        async with httpx.AsyncClient(transport=PooledTransport(max_idle=max_idle)) as client:
            one_by_one = [(await client.get(f"{base}/")).text for _ in range(sequential)]
            at_once = [r.text for r in await asyncio.gather(*(client.get(f"{base}/") for _ in range(concurrent)))]
            after = [(await client.get(f"{base}/")).text for _ in range(concurrent)]
            return [one_by_one, at_once, after]

    return asyncio.run(run())


def test_sequential_requests_reuse_one_connection(server):
    one_by_one, _, _ = ports(server, sequential=5, concurrent=0)
    assert len(set(one_by_one)) == 1, one_by_one


def test_concurrent_requests_get_their_own_connections_and_only_max_idle_are_kept(server):
    _, at_once, after = ports(server, sequential=0, concurrent=6, max_idle=2)
    assert len(set(at_once)) == 6, at_once
    # Afterwards requests one at a time reuse a kept connection: never a seventh.
    assert set(after) <= set(at_once) and len(set(after)) == 1, (at_once, after)


def test_a_refused_connection_is_httpx_connect_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def run() -> None:
        async with httpx.AsyncClient(transport=PooledTransport(max_idle=1)) as client:
            await client.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(run())
