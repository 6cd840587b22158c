# SPDX-License-Identifier: MIT
"""fencelock.aio: the binding for asyncio programs.

    import asyncio
    import fencelock.aio

    async def main():
        async with fencelock.aio.open(path) as r:
            async with await r.acquire("jobs/42", lease=5.0, timeout=10) as lease:
                await r.commit(lease, "jobs/42/state", b"done")

    asyncio.run(main())

open() returns an AsyncRegion, opened by `async with` (closed on exit) or by
`await` (then `await r.close()`).  Its coroutines mirror Region's: acquire()
returns an AsyncLease (`async with` releases it; release(), renew() and
check() are coroutines; token, key, deadline as Lease's), commit(), read()
and the others take the same arguments and raise the same exceptions.

What runs on the event loop.  On a region file (shared memory) every call
that cannot wait is a few hundred nanoseconds of memory operations and runs
on the loop: the try that begins every acquire() (timeout 0), release(),
renew(), check(), commit(), read().

What runs off the loop, each call in a thread started for it:
- a wait: acquire() of a key that the try found held, unless timeout == 0,
  runs Region.acquire(..., cancel=Cancel()) in the thread;
- open() and close() (registration with the supervisor is a socket);
- every call on an etcd:// or etcds:// region (each is network round trips).
A thread of its own, not a pool's: the library answers Deadlock to a wait
on a key held by an acquisition that the calling thread made, and a pool's
thread that had taken the key for one task would give that answer to
another task's wait.

Cancellation.  task.cancel(), asyncio.wait_for() and asyncio.timeout() end a
wait at once: the CancelledError that enters acquire() triggers the wait's
Cancel, acquire() then waits, shielded from further cancels, for the thread
to return (it returns at once), and if the thread acquired the key anyway
(the key came free just before the cancel) releases that lease; only then
is CancelledError raised.  So a wait that was cancelled or timed out leaves
nothing held, and once CancelledError reaches the caller no thread is still
working for that call.  A call that cannot be cancelled in C (a commit, a
read or a release on etcd) runs to its end before CancelledError is raised:
a commit cancelled in flight may have been accepted.

Deadlock, per task.  The library's rule for a thread is this module's rule
for a task: a wait by the task that holds the key through this AsyncRegion,
by an unexpired lease of its latest acquisition, raises Deadlock at once (it
could only end by taking the task's own lease over); another task waits for
it as another thread would.

Ctrl-C.  Under asyncio.run() the first Ctrl-C cancels the main task (the
SIGINT handler asyncio.run installs), which ends a wait in it as above;
asyncio.run() then raises KeyboardInterrupt.  Nothing is held afterwards.

close() (and the end of `async with`) ends the waits in flight (they raise
Closed, a ValueError, as calls on a closed Region do), waits for every thread of the
region's calls, then closes the Region.  An AsyncRegion belongs to the event
loop that uses it; .region is the Region underneath, for what this module
does not wrap (keepalives, inspection, other threads).

Counters: a wait on a region file is a try and then a wait, so a key's
`busy` counter counts every async wait that found it held.
"""
from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar

from . import Busy, Cancel, Cancelled, Closed, Deadlock, Key, Lease, Region
from ._names import encode_name
from ._region import Bytes, RegionPath, _ns, _timeout_ns
from . import open as _open_sync

__all__ = ["open", "AsyncRegion", "AsyncLease"]

T = TypeVar("T")

_REMOTE_SCHEMES = ("etcd://", "etcds://")

_State = Literal["new", "opening", "open", "closing", "closed"]


def open(region: RegionPath | None = None, *,  # noqa: A001 - the API's name
         readonly: bool = False) -> AsyncRegion:
    """An AsyncRegion for region (None: $FENCELOCK_REGION, else the default path), opened
    by `async with` (which closes it on exit) or by `await` (then close() it).
    readonly=True: for inspection and read() only, as fencelock.open's."""
    return AsyncRegion(region, readonly=readonly)


def _closed_error() -> Closed:
    """Closed (a ValueError too), as the sync Region's."""
    return Closed(errno.EBADF, None, "operation on a closed fencelock.aio.AsyncRegion")


def _name_of(key: str | bytes | Key) -> bytes:
    """A key's name as one value for str, bytes and Key (the bookkeeping of own holdings)."""
    name = key.name if isinstance(key, Key) else key
    return encode_name(name, "key")  # as the sync binding encodes it (and refuses a NUL)


def _release_quietly(lease: Lease) -> None:
    """Release a lease nobody will receive (a cancelled wait's).  A lease already lost is
    gone anyway: nothing to report, and nobody to report it to."""
    try:
        lease.release()
    except Exception:  # noqa: BLE001 - cleanup of a lease with no owner
        pass


def _close_quietly(region: Region) -> None:
    try:
        region.close()
    except Exception:  # noqa: BLE001 - cleanup of a region with no owner
        pass


async def _until(fut: asyncio.Future[None]) -> bool:
    """Wait until fut is done whatever cancels come meanwhile; True if any came (the
    caller raises CancelledError once it has finished)."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


def _wait(region: Region, key: str | bytes | Key, lease: float, timeout: float | None,
          cancel: Cancel, own: Lease | None) -> Lease:
    """A wait, in a thread started for it (see the module's docstring)."""
    if own is not None and own.check():
        raise Deadlock(errno.EDEADLK, None,
                       f"key {key!r}: held by this task's own lease {own!r} through this "
                       "AsyncRegion: a wait could only end by taking it over; release it first")
    try:
        return region.acquire(key, lease, timeout, cancel=cancel)
    except Deadlock:
        # The library answers for the calling thread, and this new thread has the id of
        # an exited one that made the holding (the kernel reuses thread ids); the task's
        # own holding was ruled out above.  Wait from another new thread, started while
        # this one lives so that its id differs.
        box: list[Lease | BaseException] = []

        def again() -> None:
            try:
                box.append(region.acquire(key, lease, timeout, cancel=cancel))
            except BaseException as e:  # noqa: BLE001 - handed to the caller below
                box.append(e)

        t = threading.Thread(target=again, name="fencelock-aio-wait", daemon=True)
        t.start()
        t.join()
        got = box[0]
        if isinstance(got, BaseException):
            raise got from None
        return got


class _Call(Generic[T]):
    """One call run in a thread started for it, and the hand-over of its result to the
    loop.  A result that nobody will receive (the lease of a cancelled wait, a region
    opened for a cancelled open) is discarded exactly once, by whoever finds it so: the
    coroutine after a cancel (once the thread is done), the coroutine left another way
    (GeneratorExit, KeyboardInterrupt) if the thread was done, else the thread when it
    is, or the thread if the loop is closed."""

    def __init__(self, fn: Callable[[], T], discard: Callable[[T], None] | None,
                 cancel: Cancel | None, discard_off_loop: bool) -> None:
        self._fn = fn
        self._discard = discard
        self._discard_off_loop = discard_off_loop
        self.cancel = cancel
        self.by_close = False  # ended by AsyncRegion.close()
        self._lock = threading.Lock()
        self._ran = False  # the thread has its result (under _lock)
        self._abandoned = False  # the coroutine will not take it (under _lock)
        self._taken = False  # somebody took it, to return or to discard (under _lock)
        self._result: tuple[T] | None = None
        self._exc: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self.thread_done: asyncio.Future[None] = self._loop.create_future()  # the thread is done
        self.settled: asyncio.Future[None] = self._loop.create_future()  # and the coroutine
        threading.Thread(target=self._run, name="fencelock-aio", daemon=True).start()

    # -- in the thread ---------------------------------------------------------

    def _run(self) -> None:
        result: tuple[T] | None = None
        exc: BaseException | None = None
        try:
            result = (self._fn(),)
        except BaseException as e:  # noqa: BLE001 - handed to the coroutine
            exc = e
        with self._lock:
            self._result, self._exc, self._ran = result, exc, True
            mine = self._abandoned and not self._taken
            self._taken |= mine
        if mine:
            self._drop(result)
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: no coroutine will take the result
            with self._lock:
                mine, self._abandoned, self._taken = not self._taken, True, True
            if mine:
                self._drop(result)

    def _drop(self, result: tuple[T] | None) -> None:
        if result is not None and self._discard is not None:
            self._discard(result[0])

    # -- on the loop -------------------------------------------------------------

    def _wake(self) -> None:
        if not self.thread_done.done():
            self.thread_done.set_result(None)

    def _abandon(self) -> tuple[T] | None:
        """The coroutine gives the result up: the result, if it is the coroutine's to
        discard (else the thread discards it when it has it)."""
        with self._lock:
            self._abandoned = True
            mine = self._ran and not self._taken
            self._taken |= mine
        return self._result if mine else None

    def end_by_close(self) -> None:
        self.by_close = True
        if self.cancel is not None:
            self.cancel.cancel()

    async def finished(self) -> bool:
        """Until the thread is done, whatever cancels come; True if any came."""
        return await _until(self.thread_done)

    async def result(self) -> T:
        left = True  # until the coroutine has dealt with the result
        try:
            try:
                await asyncio.shield(self.thread_done)
            except asyncio.CancelledError:
                if self.cancel is not None:
                    self.cancel.cancel()  # a wait ends at once
                await self.finished()
                result = self._abandon()
                left = False
                if result is not None and self._discard is not None:
                    if self._discard_off_loop:
                        await _Call(lambda: self._drop(result), None, None, False).finished()
                    else:
                        self._drop(result)
                raise
            with self._lock:
                self._taken = True
            left = False
            if self._exc is not None:
                raise self._exc
            assert self._result is not None
            return self._result[0]
        finally:
            if left:  # GeneratorExit, a second Ctrl-C: no more waiting here
                if self.cancel is not None:
                    self.cancel.cancel()
                self._drop(self._abandon())
            self._exc = None  # no cycle through the traceback
            if not self.settled.done():
                self.settled.set_result(None)


class AsyncLease:
    """One acquisition through an AsyncRegion: the sync Lease (.lease) with coroutines to
    release, renew and check it.  `async with` releases it on exit; on exit by an
    exception a failed release is added to that exception as a note instead of replacing
    it (as Lease's `with`)."""

    def __init__(self, region: AsyncRegion, lease: Lease, task: asyncio.Task[Any] | None,
                 name: bytes) -> None:
        self._aregion = region
        self.lease: Lease = lease
        self._task = task  # the task that acquired it (the rule of Deadlock)
        self._name = name
        self._released = False

    @property
    def key(self) -> str | bytes:
        """The key as given to acquire() (a Key's name for a Key)."""
        key: str | bytes = self.lease.key
        return key

    @property
    def token(self) -> int:
        token: int = self.lease.token
        return token

    @property
    def deadline(self) -> float:
        """When the lease ends unless renewed, in time.monotonic() seconds."""
        deadline: float = self.lease.deadline
        return deadline

    @property
    def expired_previous(self) -> bool:
        return bool(self.lease.expired_previous)

    @property
    def owner_died_previous(self) -> bool:
        return bool(self.lease.owner_died_previous)

    def remaining(self) -> float:
        """Seconds left until deadline (negative once past)."""
        left: float = self.lease.remaining()
        return left

    async def release(self) -> None:
        """Release the lock (Lease.release).  Raises OwnershipLost if it was taken over
        meanwhile (or was released before)."""
        try:
            await self._aregion._call(self.lease.release)
            self._released = True
        finally:
            self._aregion._forget(self)

    async def renew(self, lease: float | None = None) -> None:
        """Extend the lease to now + lease seconds (None: the length it was acquired with);
        Lease.renew."""
        await self._aregion._call(lambda: self.lease.renew(lease))

    async def check(self) -> bool:
        """True while this lease is its key's current, unexpired holding (Lease.check)."""
        held: bool = await self._aregion._call(self.lease.check)
        return held

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._released:
            return
        if exc is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as e:  # never mask the exception that ended the block
            exc.add_note(f"fencelock: releasing {self!r} on exit also failed: {e}")

    def __repr__(self) -> str:
        return f"<fencelock.aio.AsyncLease key={self.key!r} token={self.token}>"

    def __reduce__(self) -> Any:
        raise TypeError("a fencelock lease cannot be pickled or sent to another process")


class AsyncRegion:
    """One region opened for asyncio: see the module's docstring.  Made by open()."""

    def __init__(self, region: RegionPath | None = None, *,
                 readonly: bool = False) -> None:
        self._spec = region
        self.readonly = readonly
        self._region: Region | None = None
        self._remote = False  # etcd:// or etcds://: every call off the loop
        self._state: _State = "new"
        self._calls: set[_Call[Any]] = set()
        self._held: dict[bytes, AsyncLease] = {}  # latest acquisition per key name
        self._closed_event: asyncio.Event | None = None

    # -- life cycle --------------------------------------------------------------

    async def _open(self) -> Self:
        if self._state == "open":
            return self
        if self._state != "new":
            raise ValueError(f"fencelock.aio.AsyncRegion is {self._state}: a new "
                             "fencelock.aio.open() opens the region again")
        self._state = "opening"
        spec, readonly = self._spec, self.readonly
        try:
            region: Region = await self._off_loop(lambda: _open_sync(spec, readonly=readonly),
                                                  _close_quietly, None, discard_off_loop=True)
        except BaseException:
            if self._state == "opening":
                self._state = "new"  # nothing opened: it may be tried again
            raise
        if self._state != "opening":  # closed while it opened
            await _Call(lambda: _close_quietly(region), None, None, False).finished()
            raise _closed_error()
        self._region = region
        self._remote = region.path.startswith(_REMOTE_SCHEMES)
        self._state = "open"
        return self

    def __await__(self) -> Generator[Any, None, Self]:
        return self._open().__await__()

    async def __aenter__(self) -> Self:
        return await self._open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """End the waits in flight (Closed), wait for every thread of this region's
        calls, then close the Region (locks still held through it are released as if the
        process had died).  Safe to call again.  A cancel that comes meanwhile is raised
        once the region is closed."""
        if self._state == "closed":
            return
        if self._closed_event is None:
            self._closed_event = asyncio.Event()
        if self._state == "closing":
            await self._closed_event.wait()
            return
        self._state = "closing"
        cancelled = False
        try:
            for call in list(self._calls):
                call.end_by_close()
            while self._calls:
                call = next(iter(self._calls))
                cancelled |= await _until(call.settled)
                cancelled |= await _until(call.thread_done)
                self._calls.discard(call)
            region, self._region = self._region, None
            self._held.clear()
            if region is not None:
                cancelled |= await _Call(region.close, None, None, False).finished()
        finally:
            self._state = "closed"
            self._closed_event.set()
        if cancelled:
            raise asyncio.CancelledError()

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    @property
    def region(self) -> Region:
        """The Region underneath (a blocking API: not for calls that may wait, nor for any
        call of an etcd region, on the loop)."""
        return self._open_region()

    @property
    def path(self) -> str:
        """The region file this handle maps, or the etcd:// string (Region.path)."""
        path: str = self._open_region().path
        return path

    @property
    def backend(self) -> str:
        """"shm" or "etcd": the backend of the region string (Region.backend)."""
        backend: str = self._open_region().backend
        return backend

    @property
    def registered(self) -> bool:
        """True if registered with a supervisor (Region.registered)."""
        registered: bool = self._open_region().registered
        return registered

    def __repr__(self) -> str:
        if self._state == "open" and self._region is not None:
            return f"<fencelock.aio.AsyncRegion {self._region.path!r}>"
        return f"<fencelock.aio.AsyncRegion {self._state}>"

    def __reduce__(self) -> Any:
        raise TypeError("a fencelock AsyncRegion cannot be pickled or sent to another process: "
                        "pass its path and open it there")

    # -- the two ways a call runs ----------------------------------------------

    def _open_region(self) -> Region:
        region = self._region
        if self._state != "open" or region is None:
            if self._state in ("new", "opening"):
                raise ValueError("fencelock.aio.AsyncRegion not open yet: use `async with "
                                 "fencelock.aio.open(...)` or `await fencelock.aio.open(...)`")
            raise _closed_error()
        return region

    async def _off_loop(self, fn: Callable[[], T], discard: Callable[[T], None] | None,
                        cancel: Cancel | None, discard_off_loop: bool | None = None) -> T:
        call = _Call(fn, discard, cancel,
                     self._remote if discard_off_loop is None else discard_off_loop)
        self._calls.add(call)
        try:
            return await call.result()
        except Cancelled:
            if call.by_close:
                raise _closed_error() from None
            raise
        finally:
            # close() waits for the thread too: a coroutine closed at its await (GeneratorExit)
            # leaves before its thread is done
            if call.thread_done.done():
                self._calls.discard(call)
            else:
                call.thread_done.add_done_callback(lambda _: self._calls.discard(call))

    async def _call(self, fn: Callable[[], T]) -> T:
        """A call that does not wait: on the loop, or off it for etcd."""
        self._open_region()
        if not self._remote:
            return fn()
        return await self._off_loop(fn, None, None)

    # -- locks -----------------------------------------------------------------

    async def acquire(self, key: str | bytes | Key, lease: float = 30.0,
                      timeout: float | None = None) -> AsyncLease:
        """Acquire key's lock for lease seconds (Region.acquire): timeout None waits
        forever, 0 tries once, > 0 waits at most that long.  Returns an AsyncLease.
        Raises Busy if the key stayed held, Deadlock if this task holds it through this
        AsyncRegion (a wait could only take its own lease over).  A wait never blocks the
        loop, and ends at once on task.cancel() (asyncio.wait_for, asyncio.timeout)
        leaving nothing held."""
        # Checked as the sync acquire() checks them, before the try on the loop (which
        # would take a free key with a timeout the wait would refuse).
        _ns(lease, "lease")
        if timeout != 0:
            _timeout_ns(timeout)
        region = self._open_region()
        name = _name_of(key)
        if not self._remote:
            try:
                got: Lease = region.acquire(key, lease, 0)
            except Busy:
                if timeout == 0:
                    raise
            else:
                return self._adopt(got, name)
        elif timeout == 0:
            got = await self._off_loop(lambda: region.acquire(key, lease, 0), _release_quietly,
                                       None)
            return self._adopt(got, name)
        mine = self._held.get(name)
        own = mine.lease if mine is not None and mine._task is asyncio.current_task() else None
        with Cancel() as cancel:
            got = await self._off_loop(lambda: _wait(region, key, lease, timeout, cancel, own),
                                       _release_quietly, cancel)
        return self._adopt(got, name)

    def _adopt(self, lease: Lease, name: bytes) -> AsyncLease:
        a = AsyncLease(self, lease, asyncio.current_task(), name)
        self._held[name] = a
        return a

    def _forget(self, a: AsyncLease) -> None:
        if self._held.get(a._name) is a:
            del self._held[a._name]

    async def resolve(self, key: str | bytes) -> Key:
        """Region.resolve: the key looked up once, for acquire()."""
        region = self._open_region()
        k: Key = await self._call(lambda: region.resolve(key))
        return k

    # -- fenced records ----------------------------------------------------------

    @staticmethod
    def _lease(lease: AsyncLease | Lease) -> Lease:
        return lease.lease if isinstance(lease, AsyncLease) else lease

    def _data(self, data: Bytes) -> Any:
        # A thread reads it later: a copy, so that the caller may reuse its buffer.  Only
        # bytes-like objects (memoryview refuses the rest, as commit does).
        return bytes(memoryview(data)) if self._remote else data

    async def commit(self, lease: AsyncLease | Lease, record: str | bytes, data: Bytes,
                     strict: bool = False) -> int:
        """Region.commit: data (bytes-like) to record, fenced by lease's token; returns the
        accepted token.  StaleFence, ScopeMismatch as Region.commit."""
        region, sync, data = self._open_region(), self._lease(lease), self._data(data)
        accepted: int = await self._call(lambda: region.commit(sync, record, data, strict))
        return accepted

    async def commit_u64(self, lease: AsyncLease | Lease, record: str | bytes, value: int,
                         strict: bool = False) -> int:
        """Region.commit_u64: one 64-bit unsigned number, fenced; as commit()."""
        region, sync = self._open_region(), self._lease(lease)
        accepted: int = await self._call(lambda: region.commit_u64(sync, record, value, strict))
        return accepted

    async def commit_token(self, key: str | bytes, token: int, record: str | bytes, data: Bytes,
                           strict: bool = False) -> int:
        """Region.commit_token: fenced by a token that key issued, without its lease."""
        region, data = self._open_region(), self._data(data)
        accepted: int = await self._call(
            lambda: region.commit_token(key, token, record, data, strict))
        return accepted

    async def read(self, record: str | bytes) -> tuple[bytes, int]:
        """Region.read: (data, fence).  NotFound (a KeyError) if never committed."""
        region = self._open_region()
        value: tuple[bytes, int] = await self._call(lambda: region.read(record))
        return value

    async def read_u64(self, record: str | bytes) -> tuple[int, int]:
        """Region.read_u64: (value, fence)."""
        region = self._open_region()
        value: tuple[int, int] = await self._call(lambda: region.read_u64(record))
        return value
