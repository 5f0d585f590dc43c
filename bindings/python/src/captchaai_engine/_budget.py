"""The solvers' thread budget: the engine's thread gate (``account.thread-gate``, in its own small
engine instance) decides which solves may start and in what order; this only waits for its
decisions, on threads (:meth:`ThreadBudget.enter`) or on asyncio (:meth:`ThreadBudget.enter_async`).
"""

from __future__ import annotations

import asyncio
import threading

from .engine import Engine, ThreadGate
from .errors import Failure


class ThreadBudget:
    """At most ``plan_threads - reserve`` solves at once; the others wait in arrival order.
    Thread-safe. Every ticket :meth:`enter` returns must be given back to :meth:`leave`."""

    def __init__(self, plan_threads: int, reserve: int = 0) -> None:
        self._engine = Engine()
        gate = self._engine.thread_gate(plan_threads, reserve)
        if isinstance(gate, Failure):
            raise gate.to_exception()
        self._gate: ThreadGate = gate
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # Queued tickets the gate has admitted since: waiting threads' tickets, and asyncio
        # waiters' futures by ticket.
        self._admitted: set[int] = set()
        self._futures: dict[int, asyncio.Future[None]] = {}

    def __repr__(self) -> str:
        return f"ThreadBudget(capacity={self.capacity})"

    @property
    def capacity(self) -> int:
        """How many solves the engine admits at once."""
        with self._lock:
            return self._gate.capacity

    def enter(self) -> int:
        """Blocks until the engine admits a new solve; returns its ticket."""
        with self._lock:
            ticket, (admission, _ahead) = self._gate.enter()
            if admission == "admitted":
                return ticket
            try:
                while ticket not in self._admitted:
                    self._changed.wait()
            except BaseException:  # interrupted while queued: give the place (or thread) back
                self._leave(ticket)
                raise
            self._admitted.discard(ticket)
            return ticket

    async def enter_async(self) -> int:
        """Waits until the engine admits a new solve; returns its ticket. Cancelled while
        waiting, it gives its place back."""
        with self._lock:
            ticket, (admission, _ahead) = self._gate.enter()
            if admission == "admitted":
                return ticket
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._futures[ticket] = future
        try:
            await future
        except BaseException:
            self.leave(ticket)
            raise
        return ticket

    def leave(self, ticket: int) -> None:
        """Ends an admitted ticket's solve (or withdraws a queued one) and wakes those the engine
        admits in its place."""
        with self._lock:
            self._leave(ticket)

    def _leave(self, ticket: int) -> None:
        self._futures.pop(ticket, None)
        self._admitted.discard(ticket)
        for next_ticket in self._gate.leave(ticket) or []:
            future = self._futures.pop(next_ticket, None)
            if future is None:
                self._admitted.add(next_ticket)
            elif not future.done():
                future.get_loop().call_soon_threadsafe(_admit, future)
            else:  # its waiter was cancelled and is giving the thread back
                self._admitted.add(next_ticket)
        self._changed.notify_all()


def _admit(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
