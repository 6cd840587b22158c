# SPDX-License-Identifier: MIT
"""Region, Lease and Keepalive: the Python face of fl_region, fl_lease and fl_keepalive.

Threads: a Region may be shared by the threads of a process, as the C handle
may (ctypes releases the GIL during every call, so a thread waiting in
acquire() does not stop the others).  A Lease is a value: use one lease from
one thread at a time.

close() while calls are in flight (another thread's acquire(), a signal
handler that closes the Region the main thread waits on): every call
registers itself in the Region's list of calls in flight before it reads the
C handle, and close() clears the handle before it looks at that list (the
GIL orders the two, as a Dekker pair), then ends every wait (each waits with
an fl_cancel of its own, which close() triggers) and closes the C handle once
no call is in flight.  The calls that were in flight end with Closed; none
can touch a freed handle.  A close() from a thread that is itself inside a
call (a signal handler) leaves the C close to that call's end.

Fork: a Region (and its leases and keepalives) belongs to the process that
opened it.  In a fork() child every call raises ForkedHandle; the child opens
the region itself.  A Region cannot be pickled (multiprocessing's spawn): pass
its path and open it in the other process.
"""
from __future__ import annotations

import _thread
import array
import ctypes
import errno
import mmap
import operator
import os
import sys
import threading
import time
import warnings
from ctypes import byref, c_size_t, c_uint64, c_void_p
from types import TracebackType
from typing import (Any, Callable, Dict, List, Optional, Set, Type, TypeVar, Union,
                    cast)

from . import _cancel, _errors
from ._errors import Closed, ForkedHandle, OwnershipLost, StaleFence, raise_for
from ._info import ClientInfo, LockInfo, RecordInfo, RegionInfo, UnregisteredInfo
from ._names import _cache as _name_cache
from ._names import Name, encode_name, encode_path
from ._native import (COMMIT_STRICT, LEASE_EXPIRED, LEASE_OWNER_DIED, LOST_FN, TOKEN_MAX,
                      UNREGISTERED_MAX, WAIT_FOREVER, FlClientInfo, FlKey, FlLease, FlLockInfo,
                      FlRecordInfo, FlRegionInfo, FlUnregisteredInfo, has, lib)

_ENOENT, _ERANGE, _ENOBUFS = errno.ENOENT, errno.ERANGE, errno.ENOBUFS
_ESTALE, _ENAMETOOLONG, _ECANCELED = errno.ESTALE, errno.ENAMETOOLONG, errno.ECANCELED
_get_ident = _thread.get_ident

# The C types' limits, checked before ctypes sees a number (ctypes would wrap
# it modulo 2^64: a 584-year lease would be 0.29 s).
NS_MAX = (1 << 63) - 1  # lease_ns and timeout_ns: int64_t-sized in every backend
# The most seconds ctypes can carry (292 years).  A backend refuses a deadline it
# cannot record with Error EOVERFLOW: a region file records 2^48 us of
# CLOCK_MONOTONIC (a deadline up to about 8.9 years after boot).
SECONDS_MAX = NS_MAX // 1_000_000_000
U64_MAX = (1 << 64) - 1
KEEPALIVE_MIN_NS = 3000  # fl_keepalive_start's least lease_ns

# Bound once: an attribute lookup on the CDLL per call is measurable (bench.py).
_acquire_fn = lib.fl_acquire
_acquire_cancelable_fn = getattr(lib, "fl_acquire_cancelable", None)  # an older library: None
_acquire_key_fn = getattr(lib, "fl_acquire_key", None)
_acquire_key_cancelable_fn = getattr(lib, "fl_acquire_key_cancelable", None)
_release_fn, _renew_fn, _check_fn = lib.fl_release, lib.fl_renew, lib.fl_check
_commit_fn, _last_error_fn = lib.fl_commit, lib.fl_last_error

Duration = Union[int, float]
# Bytes-like objects (the buffer protocol; collections.abc.Buffer is Python 3.12's).
Bytes = Union[bytes, bytearray, memoryview, "array.array[Any]", mmap.mmap]
RegionPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
LostCallback = Callable[["Lease", "_errors.Error"], object]
_T = TypeVar("_T")


def version() -> str:
    """fl_version(): the loaded C library's version, "MAJOR.MINOR.PATCH"."""
    if not has("fl_version"):
        raise _errors.unsupported("fl_version")
    return cast(bytes, lib.fl_version()).decode("ascii", "replace")


def version_number() -> int:
    """fl_version_number(): the loaded C library's version as 0xMMmmpp (compares as an
    int: version_number() >= 0x000100 for 0.1.0 or newer)."""
    if not has("fl_version_number"):
        raise _errors.unsupported("fl_version_number")
    return int(lib.fl_version_number())


_ns_cache: Dict[Duration, int] = {}  # the few lease lengths a program uses, checked


def _ns(seconds: Duration, what: str) -> int:
    """Seconds (int or float) -> nanoseconds, 1..NS_MAX; ValueError names the limit."""
    t = type(seconds)
    if t is float or t is int:
        ns = _ns_cache.get(seconds)
        if ns is not None:
            return ns
        ns = _ns_slow(seconds, what)
        if len(_ns_cache) >= 256:
            _ns_cache.clear()
        _ns_cache[seconds] = ns
        return ns
    return _ns_slow(seconds, what)


def _ns_slow(seconds: Duration, what: str) -> int:
    t = type(seconds)
    if t is not float and t is not int:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"{what} must be a number of seconds, not "
                            f"{type(seconds).__name__}")
        seconds = float(seconds)
    if not seconds > 0:  # also NaN
        raise ValueError(f"{what} must be a positive number of seconds, not {seconds!r}")
    ns = seconds * 1_000_000_000 if t is int else seconds * 1e9
    if ns > NS_MAX:  # also inf
        raise ValueError(f"{what} must be at most {SECONDS_MAX} seconds (2^63-1 ns), not "
                         f"{seconds!r}")
    return max(1, int(ns) if t is int else round(ns))


def _timeout_ns(timeout: Optional[Duration]) -> int:
    if timeout is None:
        return WAIT_FOREVER
    if timeout == 0 and not isinstance(timeout, bool):
        return 0
    return _ns(timeout, "timeout (None waits forever, 0 tries once)")


def _u64(value: int, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    v = operator.index(value)
    if not 0 <= v <= U64_MAX:
        raise ValueError(f"{what} must be in 0..2^64-1 ({U64_MAX}), not {v}")
    return v


def _data(data: Bytes) -> bytes:
    """A commit's bytes: bytes-like objects only (bytes(5) would be five NULs, and a str
    has no one encoding)."""
    if type(data) is bytes:
        return data
    try:
        return memoryview(data).tobytes()
    except TypeError:
        raise TypeError(f"data must be a bytes-like object (bytes, bytearray, memoryview), "
                        f"not {type(data).__name__}") from None


def default_region_path() -> str:
    """The region used when none is given: $FENCELOCK_REGION, else the per-user default."""
    cap = 256
    while True:
        buf = ctypes.create_string_buffer(cap)
        rc = lib.fl_default_region_path(buf, cap)
        if rc == -_ENAMETOOLONG and cap < 1 << 16:
            cap *= 4
            continue
        if rc < 0:
            raise_for(rc)
        return os.fsdecode(buf.value)


def open(region: Optional[RegionPath] = None, *,  # noqa: A001
         readonly: bool = False) -> "Region":
    """Open a region (None: $FENCELOCK_REGION, else default_region_path()) and register
    with its supervisor.  readonly=True maps it for inspection only (info(), locks(),
    records(), clients(), read()).  Returns a Region, a context manager that closes it."""
    return Region(region, readonly=readonly)


# Thunks of keepalives stopped on the keepalive thread itself (from on_lost): the
# C thread is still returning through the thunk, so it is never freed.
_retired_thunks: List[object] = []
_on_keeper = threading.local()  # .depth > 0 while a fencelock on_lost callback runs


def _in_callback() -> bool:
    return getattr(_on_keeper, "depth", 0) > 0


class Region:
    """One open region (fl_region).  Use as a context manager, or call close().  A Region
    that is collected unclosed is closed then, with a ResourceWarning (as files are)."""

    readonly: bool

    def __init__(self, region: Optional[RegionPath] = None, *,
                 readonly: bool = False) -> None:
        self._h: Optional[c_void_p] = None
        self._active: List[int] = []  # threads inside a call (see the module)
        self._waits: Set[int] = set()  # the fl_cancel of every wait in flight
        # Reentrant: close() from a signal handler may interrupt a holder of it.
        self._wait_lock = threading.RLock()
        self._spare_cancels: List[c_void_p] = []  # per-wait fl_cancels for reuse
        self._closing: Optional[c_void_p] = None  # the C handle close() left to a call
        self._c_closed = threading.Event()  # set once the C handle is closed
        self._pid = os.getpid()
        self._keepalives: Set[Keepalive] = set()
        self._ka_lock = threading.Lock()
        self.readonly = readonly
        path = None if region is None else encode_path(region)
        h = c_void_p()
        fn = lib.fl_open_readonly if readonly else lib.fl_open
        rc = fn(path, byref(h))
        if rc < 0:
            raise_for(rc, "" if region is None else f"region {os.fsdecode(region)!r}")
        self._h = h

    # -- life cycle --------------------------------------------------------

    def close(self) -> None:
        """Stop this region's keepalives and close the handle; locks still held through it
        are released as if the process had died.  Calls in flight on other threads (waits
        included) end with Closed, and close() returns once they have.  Safe to call
        again, and from a signal handler or an on_lost callback.  In a fork() child it
        only unmaps the child's copy (the parent's keepalives and locks are left alone)."""
        h, self._h = self._h, None  # first: a call that starts now sees it (the module)
        if h is None:
            return
        if os.getpid() != self._pid:
            # A fork() child: its copies of the parent's calls in flight and keepalives
            # have no thread here; only the child's copy of the mapping is undone.
            lib.fl_close(h)
            return
        # The waits first: an on_lost callback waiting in acquire() must end (Closed)
        # before the keepalive stops below, which wait for running callbacks.
        with self._wait_lock:
            waits = list(self._waits)
        for c in waits:
            lib.fl_cancel_trigger(c)
        self._closing = h
        me = _get_ident()
        if me in self._active or _in_callback():
            # A signal handler inside one of our calls (which may hold a keepalive's
            # lock), or the keepalive thread (a call in flight may be a stop() waiting
            # for this very callback): never wait, never take a keepalive here.  Close
            # now if no call is in flight, else the last one to end closes (and stops
            # the keepalives then: _close_if_idle).
            self._close_if_idle()
            return
        for k in list(self._keepalives):
            try:
                k.stop()
            except _errors.Error:
                pass  # lost: the lease is gone anyway
        # Closes now if no call is in flight, else the last one to end does (their waits
        # are cancelled, so they end soon): wait for that.
        self._close_if_idle()
        if sys.is_finalizing():
            # Interpreter exit (a collected Region): daemon threads inside calls never
            # run again, so their calls never end.  Leave the handle to the process's
            # exit, which releases its locks as a death, rather than hang.
            return
        self._c_closed.wait()

    def _close_if_idle(self) -> None:
        """The C close, once no call is in flight (by close(), or the last call's end)."""
        with self._wait_lock:
            if self._active:
                return
            h, self._closing = self._closing, None
            spare, self._spare_cancels = self._spare_cancels, []
        if h is not None:
            # Keepalives started by calls that were in flight when close() stopped the
            # others: stopped here, before fl_close frees them (no call is in flight,
            # and none can start: the handle is cleared).
            with self._ka_lock:
                left = list(self._keepalives)
            for ka in left:
                k = ka._take()
                if k is not None:
                    try:
                        ka._stopped(k)
                    except _errors.Error:
                        pass  # lost: kept in ka.error
            lib.fl_close(h)
            self._c_closed.set()
        for c in spare:
            lib.fl_cancel_free(c)

    def _call_ended(self, me: int) -> None:
        self._active.remove(me)
        if self._closing is not None:
            self._close_if_idle()

    def _closed(self, me: Optional[int] = None) -> Closed:
        if me is not None:
            self._call_ended(me)
        return Closed(errno.EBADF, None, "operation on a closed fencelock Region")

    def __del__(self) -> None:
        if getattr(self, "_h", None) is None:
            return
        try:
            warnings.warn(f"unclosed {self!r}: close it, or use it as a context manager",
                          ResourceWarning, source=self)
        except Exception:  # noqa: BLE001 - interpreter shutdown: close anyway
            pass
        self.close()

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError("a fencelock Region cannot be pickled or sent to another process: "
                        "pass its path (region.path) and call fencelock.open(path) there")

    def __repr__(self) -> str:
        if self._h is None:
            return "<fencelock.Region closed>"
        return f"<fencelock.Region {self.path!r} registered={self.registered}>"

    @property
    def closed(self) -> bool:
        return self._h is None

    def _run(self, fn: Callable[[c_void_p], _T]) -> _T:
        """fn(C handle) as a call in flight (see the module)."""
        me = _get_ident()
        self._active.append(me)
        h = self._h
        if h is None:
            raise self._closed(me)
        try:
            return fn(h)
        finally:
            self._call_ended(me)

    @property
    def path(self) -> str:
        """The region file this handle maps (or the etcd URI, password hidden)."""
        return os.fsdecode(self._run(lambda h: cast(bytes, lib.fl_region_path(h))))

    @property
    def backend(self) -> str:
        """The backend fl_open chose from the region string: "shm" (a region file) or
        "etcd" (an etcd:// or etcds:// cluster)."""
        return self._run(lambda h: cast(bytes, lib.fl_region_backend(h))).decode("ascii")

    @property
    def registered(self) -> bool:
        """True if registered with a supervisor (death detection on)."""
        return self._run(lambda h: int(lib.fl_region_registered(h))) == 1

    # -- locks ---------------------------------------------------------------

    def resolve(self, key: Name) -> "Key":
        """Look key up once (fl_key_resolve), creating it as acquire() would (nothing is
        acquired), and return a Key: acquire(that Key) takes the same lock, with the same
        tokens, without looking the name up again.  A Key belongs to this Region (another
        Region refuses it).  Raises Error EINVAL for a bad key, ENOSPC if the key is new
        and the region's lock table is full."""
        if not has("fl_key_resolve"):
            raise _errors.unsupported("fl_key_resolve")
        c = FlKey()
        b = encode_name(key, "key")
        rc = self._run(lambda h: int(lib.fl_key_resolve(h, b, byref(c))))
        if rc < 0:
            raise_for(rc, f"key {key!r}")
        return Key(self, key, c)

    def acquire(self, key: Union[Name, "Key"], lease: Duration = 30.0,
                timeout: Optional[Duration] = None,
                cancel: Optional[_cancel.Cancel] = None) -> "Lease":
        """Acquire key's lock for lease seconds.  key: a name (str or bytes), or a Key
        from resolve() (the same lock, without the name's lookup).  timeout: None waits
        forever, 0 tries once, > 0 waits at most that many seconds.  Returns a Lease (a
        context manager that releases it).

        cancel: a fencelock.Cancel; its cancel(), from any thread, ends the wait with
        Cancelled (a free key is still acquired).  close() of the Region ends it with
        Closed.

        Signals: a wait in the main thread ends when a signal with a Python handler
        arrives, runs the handler at once, and raises what it raises: Ctrl-C
        (KeyboardInterrupt) ends even a timeout=None wait.  A handler that returns lets
        the wait go on for the time left.  (The C wait is fl_acquire_cancelable with a
        cancel that a helper thread triggers from signal.set_wakeup_fd's pipe; the
        wakeup fd set before is restored afterwards and sees every signal too.)  Waits
        in other threads ignore signals: end them with a Cancel.

        Raises Busy if the key stayed held, Deadlock if the calling thread holds it
        already through this Region (a wait could only take its own lease over),
        Cancelled, Closed; ValueError for a lease or timeout out of range or a NUL in the
        key."""
        if type(key) is str:
            k: Any = _name_cache.get(key) or encode_name(key, "key")
            acq, acq_cancelable = _acquire_fn, _acquire_cancelable_fn
        elif isinstance(key, Key):
            k = key._for(self)
            acq, acq_cancelable = _acquire_key_fn, _acquire_key_cancelable_fn
        else:
            k = encode_name(key, "key")
            acq, acq_cancelable = _acquire_fn, _acquire_cancelable_fn
        lease_ns = _ns(lease, "lease")
        timeout_ns = 0 if timeout == 0 and type(timeout) is not bool else _timeout_ns(timeout)
        if cancel is not None and not isinstance(cancel, _cancel.Cancel):
            raise TypeError(f"cancel must be a fencelock.Cancel, not {type(cancel).__name__}")
        c = FlLease()
        me = _get_ident()  # _run(), inlined: the hot path (bench.py, question 8)
        active = self._active
        active.append(me)
        h = self._h
        if h is None:
            raise self._closed(me)
        try:
            if timeout_ns == 0:
                # A try: nothing to end, so no cancel (the Cancel's flag is irrelevant:
                # a free key is acquired even when it is set).  ctypes passes c by
                # reference (the argument's type is POINTER(FlLease)).
                rc = acq(h, k, lease_ns, 0, c)
                detail = _last_error_fn() if rc < 0 else None
            else:
                rc, detail = self._wait(acq_cancelable, h, k, lease_ns, timeout_ns, cancel, c)
        finally:
            active.remove(me)
            if self._closing is not None:
                self._close_if_idle()
        if rc < 0:
            raise_for(rc, f"key {key.name if isinstance(key, Key) else key!r}",
                      detail=detail.decode("utf-8", "replace") if detail else "")
        return Lease(self, key.name if isinstance(key, Key) else key, c, lease_ns)

    def _wait(self, acq_cancelable: Any, h: c_void_p, k: Any, lease_ns: int, timeout_ns: int,
              cancel: Optional[_cancel.Cancel], c: FlLease) -> "tuple[int, Optional[bytes]]":
        """A wait, with an fl_cancel that close() triggers (and cancel's, and in the main
        thread the signal watcher's).  Returns (rc, fl_last_error() bytes or None); rc is
        -EBADF once the Region was closed."""
        w = _cancel.watcher()
        if w is not None:
            mine = w.cancel  # the main thread's: signals trigger it (see _cancel.py)
        else:
            with self._wait_lock:
                spare = self._spare_cancels.pop() if self._spare_cancels else None
            mine = spare if spare is not None else _cancel._new_cancel()
            lib.fl_cancel_reset(mine)
        with self._wait_lock:
            self._waits.add(mine.value)  # type: ignore[arg-type]
        try:
            if self._h is None:  # closed after close() triggered the waits it saw
                return -errno.EBADF, None
            if w is not None:
                rc, detail = self._wait_main(acq_cancelable, h, k, lease_ns, timeout_ns,
                                             cancel, c, w)
            else:
                if cancel is not None:
                    cancel._enter(link=mine)  # its cancel() triggers mine too
                try:
                    rc = acq_cancelable(h, k, lease_ns, timeout_ns, mine, byref(c))
                    detail = _last_error_fn() if rc < 0 else None
                finally:
                    if cancel is not None:
                        cancel._exit(link=mine)
        finally:
            with self._wait_lock:
                self._waits.discard(mine.value)  # type: ignore[arg-type]
                if w is None:
                    self._spare_cancels.append(mine)
        if rc == -_ECANCELED and self._h is None:
            return -errno.EBADF, b"the Region was closed during the wait"
        return rc, detail

    def _wait_main(self, acq_cancelable: Any, h: c_void_p, k: Any, lease_ns: int,
                   timeout_ns: int, cancel: Optional[_cancel.Cancel], c: FlLease,
                   w: Any) -> "tuple[int, Optional[bytes]]":
        """A wait in the main thread, ended by signals (see acquire and _cancel.py)."""
        deadline = None if timeout_ns == WAIT_FOREVER else time.monotonic_ns() + timeout_ns
        sig = w.cancel
        user = cancel._enter(link=sig) if cancel is not None else None
        try:
            with _cancel.SignalWait(w):
                t = timeout_ns
                while True:
                    lib.fl_cancel_reset(sig)
                    if (user is not None and lib.fl_cancel_is_triggered(user)) or \
                            self._h is None:
                        lib.fl_cancel_trigger(sig)
                    _cancel.check_signals()  # those that came before the pipe was set
                    rc = acq_cancelable(h, k, lease_ns, t, sig, byref(c))
                    detail = _last_error_fn() if rc < 0 else None
                    if rc != -_ECANCELED or self._h is None or (
                            user is not None and lib.fl_cancel_is_triggered(user)):
                        return rc, detail
                    _cancel.check_signals()  # KeyboardInterrupt, or what a handler raises
                    if self._h is None:  # the handler closed the Region
                        return -errno.EBADF, b"the Region was closed during the wait"
                    if deadline is not None:  # a handler returned: wait on, time left
                        t = max(1, deadline - time.monotonic_ns())
        finally:
            if cancel is not None:
                cancel._exit(link=sig)

    # -- fenced records ------------------------------------------------------

    def _own(self, lease: "Lease") -> "Lease":
        if type(lease) is not Lease and not isinstance(lease, Lease):
            raise TypeError(f"lease must be a fencelock.Lease, not {type(lease).__name__}")
        if lease._region is not self:
            raise ValueError(f"{lease!r} was issued by another Region: a Lease commits only "
                             "through the Region that acquired it")
        return lease

    def commit(self, lease: "Lease", record: Name, data: Bytes, strict: bool = False) -> int:
        """Commit data (a bytes-like object) to record, fenced by lease's token.  Returns the
        accepted token.  Raises StaleFence if the record accepted a greater token (an equal
        one too when strict), ScopeMismatch if the record belongs to another key;
        ValueError for a Lease of another Region, TypeError for data that is not
        bytes-like."""
        if type(lease) is not Lease or lease._region is not self:
            self._own(lease)
        name = encode_name(record, "record")
        if type(data) is not bytes:
            data = _data(data)
        accepted = c_uint64()
        me = _get_ident()  # _run(), inlined: the hot path (bench.py, question 8)
        active = self._active
        active.append(me)
        h = self._h
        if h is None:
            raise self._closed(me)
        try:
            rc = _commit_fn(h, lease._c, name, data, len(data),
                            COMMIT_STRICT if strict else 0, byref(accepted))
            if rc < 0:
                self._commit_failed(rc, lease.token, record, accepted)
        finally:
            active.remove(me)
            if self._closing is not None:
                self._close_if_idle()
        return accepted.value

    def commit_u64(self, lease: "Lease", record: Name, value: int, strict: bool = False) -> int:
        """Commit one 64-bit unsigned number (0..2^64-1; the fenced-pointer pattern); as
        commit()."""
        self._own(lease)
        name = encode_name(record, "record")
        v = _u64(value, "value")
        accepted = c_uint64()

        def call(h: c_void_p) -> int:
            rc = int(lib.fl_commit_u64(h, lease._c, name, v, COMMIT_STRICT if strict else 0,
                                       byref(accepted)))
            if rc < 0:
                self._commit_failed(rc, lease.token, record, accepted)
            return rc
        self._run(call)
        return accepted.value

    def commit_token(self, key: Name, token: int, record: Name, data: Bytes,
                     strict: bool = False) -> int:
        """Commit data to record, fenced by token, a token that key issued, without its
        Lease (fl_commit_token): for a holder that has the key and the token only, such as
        a program run by `fencelock run` ($FENCELOCK_KEY, $FENCELOCK_TOKEN) or a process
        handed them.  The same fenced commit as commit(): returns the accepted token;
        raises StaleFence (.token, .accepted) if the record accepted a greater token (an
        equal one too when strict), ScopeMismatch if the record belongs to another key,
        NotFound (a KeyError) if key was never acquired in this region (nothing is
        created), Error EINVAL if key never issued token.  token: an int 1..TOKEN_MAX."""
        if not has("fl_commit_token"):
            raise _errors.unsupported("fl_commit_token")
        if isinstance(token, bool):
            raise TypeError("token must be an int, not bool")
        token = operator.index(token)
        if not 0 < token <= TOKEN_MAX:
            raise ValueError(f"token must be in 1..{TOKEN_MAX}, not {token}")
        kname = encode_name(key, "key")
        name = encode_name(record, "record")
        raw = _data(data)
        accepted = c_uint64()

        def call(h: c_void_p) -> int:
            rc = int(lib.fl_commit_token(h, kname, token, name, raw, len(raw),
                                         COMMIT_STRICT if strict else 0, byref(accepted)))
            if rc == -_ENOENT:
                raise_for(rc, f"key {key!r}", _errors.NotFound)
            if rc < 0:
                self._commit_failed(rc, token, record, accepted)
            return rc
        self._run(call)
        return accepted.value

    @staticmethod
    def _commit_failed(rc: int, token: int, record: Name, accepted: c_uint64) -> None:
        if rc == -_ESTALE:
            raise_for(rc, f"record {record!r}", StaleFence, token=token,
                      accepted=accepted.value)
        raise_for(rc, f"record {record!r}")

    def read(self, record: Name) -> "tuple[bytes, int]":
        """The record's current value and the token that wrote it: (data, fence).
        Raises NotFound (a KeyError) if it was never committed."""
        name = encode_name(record, "record")
        n, fence = c_size_t(), c_uint64()

        def call(h: c_void_p) -> bytes:
            cap = 256
            while True:
                buf = ctypes.create_string_buffer(cap)
                rc = int(lib.fl_read(h, name, buf, cap, byref(n), byref(fence)))
                if rc == -_ENOBUFS:
                    cap = max(n.value, cap * 2)  # grown meanwhile: try again
                    continue
                if rc < 0:
                    raise_for(rc, f"record {record!r}",
                              _errors.NotFound if rc == -_ENOENT else None)
                return buf.raw[:n.value]
        data = self._run(call)
        return data, fence.value

    def read_u64(self, record: Name) -> "tuple[int, int]":
        """A record holding one 64-bit number: (value, fence)."""
        name = encode_name(record, "record")
        value, fence = c_uint64(), c_uint64()
        rc = self._run(lambda h: int(lib.fl_read_u64(h, name, byref(value), byref(fence))))
        if rc < 0:
            raise_for(rc, f"record {record!r}", _errors.NotFound if rc == -_ENOENT else None)
        return value.value, fence.value

    # -- inspection ----------------------------------------------------------

    def info(self) -> RegionInfo:
        """The region's header and counters (RegionInfo)."""
        c = FlRegionInfo()
        rc = self._run(lambda h: int(lib.fl_region_info_get(h, byref(c))))
        if rc < 0:
            raise_for(rc)
        return RegionInfo.from_c(c)

    def _table(self, fn: Any, cls: Any, ctype: Any, first: int, last: int) -> List[Any]:
        def call(h: c_void_p) -> List[Any]:
            out = []
            for i in range(first, last + 1):
                c = ctype()
                rc = fn(h, i, byref(c))
                if rc == -_ENOENT:
                    continue
                if rc == -_ERANGE:
                    break
                if rc < 0:
                    raise_for(rc)
                out.append(cls.from_c(c))
            return out
        return self._run(call)

    def locks(self) -> List[LockInfo]:
        """Every lock slot with a published key (list of LockInfo)."""
        n = self.info().locks_used
        return self._table(lib.fl_lock_info_get, LockInfo, FlLockInfo, 0, n - 1)

    def records(self) -> List[RecordInfo]:
        """Every record (list of RecordInfo)."""
        n = self.info().records_used
        return self._table(lib.fl_record_info_get, RecordInfo, FlRecordInfo, 0, n - 1)

    def clients(self) -> List[ClientInfo]:
        """Every live client of the supervisor's table (list of ClientInfo)."""
        n = self.info().client_capacity
        return self._table(lib.fl_client_info_get, ClientInfo, FlClientInfo, 1, n)

    def unregistered(self) -> List[UnregisteredInfo]:
        """The processes that opened this region unregistered (no supervisor answered,
        or its socket refused them) and still have it open: list of UnregisteredInfo,
        from the region's table of the latest UNREGISTERED_MAX such opens.  Display only
        (any client may write that table)."""
        if not has("fl_unregistered_info_get"):
            raise _errors.unsupported("fl_unregistered_info_get")
        return self._table(lib.fl_unregistered_info_get, UnregisteredInfo, FlUnregisteredInfo,
                           0, UNREGISTERED_MAX - 1)


class Key:
    """A key looked up once (Region.resolve, fl_key_resolve): Region.acquire(key) takes its
    lock without looking the name up again.  A plain value, usable from any thread, with
    the Region that resolved it only (until that Region is closed)."""

    __slots__ = ("name", "_region", "_c")

    def __init__(self, region: Region, name: Name, c: FlKey) -> None:
        self.name = name
        self._region = region
        self._c = c

    @property
    def slot(self) -> int:
        """The backend's number of the key (a region file: its lock slot)."""
        return int(self._c.slot)

    def _for(self, region: Region) -> Any:
        """The C key handle, for a call on region: ValueError if another Region made it."""
        if region is not self._region:
            raise ValueError(f"key handle {self.name!r} was resolved by another Region: a Key "
                             "is valid only with the Region that resolved it (resolve it there)")
        return byref(self._c)

    def __repr__(self) -> str:
        return f"<fencelock.Key {self.name!r} slot={self.slot}>"

    def __reduce__(self) -> Any:
        raise TypeError("a fencelock Key cannot be pickled or sent to another process: "
                        "resolve the key there")


class Lease:
    """One acquisition: token, key, deadline (time.monotonic() seconds), and the previous
    holder's fate (expired_previous, owner_died_previous).  As a context manager it releases
    on exit; on exit by an exception a failed release is added to that exception as a note
    instead of replacing it."""

    __slots__ = ("_region", "_c", "_len_ns", "_done", "_keepalive", "key", "__weakref__")

    def __init__(self, region: Region, key: Name, c: FlLease, lease_ns: int) -> None:
        self._region = region
        self._c = c  # passed to C as is: ctypes takes it by reference
        self._len_ns = lease_ns
        self._done = False
        self._keepalive: Optional[Keepalive] = None
        self.key = key

    @property
    def token(self) -> int:
        """The fencing token of this acquisition."""
        return int(self._c.token)

    @property
    def expired_previous(self) -> bool:
        """The previous holding of the key had expired (was taken over)."""
        return bool(self._c.flags & LEASE_EXPIRED)

    @property
    def owner_died_previous(self) -> bool:
        """The previous holder died holding the key."""
        return bool(self._c.flags & LEASE_OWNER_DIED)

    @property
    def deadline(self) -> float:
        """When the lease ends unless renewed, in time.monotonic() seconds.  While a
        keepalive runs this is its latest renewal."""
        k = self._keepalive
        if k is not None:
            return k._deadline()
        return int(self._c.deadline_ns) / 1e9

    def remaining(self) -> float:
        """Seconds left until deadline (negative once past)."""
        return self.deadline - time.monotonic()

    def __repr__(self) -> str:
        return f"<fencelock.Lease key={self.key!r} token={self.token}>"

    def renew(self, lease: Optional[Duration] = None) -> None:
        """Extend the lease to now + lease seconds (None: the length it was acquired with,
        or last renewed with).  Raises OwnershipLost if it expired and was taken over;
        ValueError (nothing changes) for a length out of range."""
        ns = self._len_ns if lease is None else _ns(lease, "lease")
        rc = self._region._run(lambda h: int(_renew_fn(h, self._c, ns)))
        if rc < 0:
            raise_for(rc, f"key {self.key!r}")
        self._len_ns = ns  # only a length that was accepted

    def release(self) -> None:
        """Release the lock.  Raises OwnershipLost if it was taken over meanwhile (or was
        released before)."""
        if self._keepalive is not None:
            try:
                self._keepalive.stop()
            except OwnershipLost:
                pass  # a lease that expired but was not taken over still releases (0)
        region = self._region  # inline _run(): the hot path (bench.py)
        me = _get_ident()
        active = region._active
        active.append(me)
        h = region._h
        if h is None:
            raise region._closed(me)
        try:
            rc = _release_fn(h, self._c)
            if rc < 0:
                raise_for(rc, f"key {self.key!r}")
        finally:
            active.remove(me)
            if region._closing is not None:
                region._close_if_idle()
        self._done = True

    def check(self) -> bool:
        """True while this lease is its key's current, unexpired holding.  One atomic read:
        for stopping a long job early, never instead of the fenced commit."""
        rc = self._region._run(lambda h: int(_check_fn(h, self._c)))
        if rc == 0:
            return True
        if rc == -_ESTALE:
            return False
        raise_for(rc, f"key {self.key!r}")

    def keep_alive(self, on_lost: Optional[LostCallback] = None,
                   lease: Optional[Duration] = None) -> "Keepalive":
        """Keep the lease renewed from the library's background thread (each renewal to now
        + lease seconds; None: the acquired length).  on_lost(lease, error), if given, is
        called on that thread when a renewal fails (error: OwnershipLost, or another Error).
        Returns a Keepalive (stop() it, or use it as a context manager)."""
        if self._keepalive is not None:
            raise ValueError(f"lease {self!r} already has a keepalive")
        ns = self._len_ns if lease is None else _ns(lease, "lease")
        if ns < KEEPALIVE_MIN_NS:
            raise ValueError(f"a kept lease must be at least {KEEPALIVE_MIN_NS} ns (3 us), not "
                             f"{ns} ns")
        k = Keepalive(self, on_lost, ns)
        self._keepalive = k
        return k

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._done:
            return
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception as e:  # never mask the exception that ended the block
            exc.add_note(f"fencelock: releasing {self!r} on exit also failed: {e}")


class Keepalive:
    """A lease kept renewed by the library's keepalive thread (fl_keepalive).

    on_lost runs on that thread, not a Python one the program started: keep it short (it
    delays the renewal of the region's other leases while it holds the GIL) and hand long
    work to other threads (a queue, an Event).  It may release other leases, stop any
    keepalive (its own included) and close the Region.  Exceptions it raises go to
    sys.unraisablehook.  The callback object is kept alive until stop()."""

    def __init__(self, lease: Lease, on_lost: Optional[LostCallback], lease_ns: int) -> None:
        self._lease = lease
        self._region = lease._region
        self._on_lost = on_lost
        self._k: Optional[c_void_p] = None
        self._lock = threading.Lock()  # guards _k against stop() (see _deadline)
        self.error: Optional[_errors.Error] = None  # the exception that lost the lease
        # The C function pointer must outlive every call the library may make: kept on
        # self, and self is kept in the region's set until stop().
        self._cb: Any = LOST_FN(self._lost)
        k = c_void_p()
        region, me = self._region, _get_ident()
        region._active.append(me)  # a call in flight (see the module)
        h = region._h
        if h is None:
            raise region._closed(me)
        try:
            rc = int(lib.fl_keepalive_start(h, lease._c, lease_ns, self._cb, None, byref(k)))
            if rc < 0:
                raise_for(rc, f"key {lease.key!r}")
            # Registered before the call ends: a close() waiting for it, or this call's
            # end closing for it, finds and stops this keepalive before fl_close.
            with self._lock:
                self._k = k
            with region._ka_lock:
                region._keepalives.add(self)
        finally:
            region._call_ended(me)

    def _lost(self, _arg: Any, _c: Any, err: int) -> None:
        self.error = _errors._CLASSES.get(-err, _errors.Error)(
            -err, None, f"keepalive of key {self._lease.key!r}")
        if self._on_lost is not None:
            _on_keeper.depth = getattr(_on_keeper, "depth", 0) + 1
            try:
                self._on_lost(self._lease, self.error)
            finally:
                _on_keeper.depth -= 1

    # The C keepalive is read under self._lock, and stop() takes it out under the same
    # lock before freeing it: a reader on another thread (lease.deadline while close()
    # stops every keepalive) never reads a freed one.  stop() does not hold the lock
    # while the C stop waits for a running on_lost, which may read these too.

    def _reading(self, read: Callable[[c_void_p], _T], stopped: Callable[[], _T]) -> _T:
        """read(k) of the C keepalive, or stopped() once it is taken.  Also a call in
        flight: a close() from a signal handler that interrupts it is left to its end."""
        region, me = self._region, _get_ident()
        region._active.append(me)
        try:
            with self._lock:
                k = self._k
                return stopped() if k is None else read(k)
        finally:
            region._call_ended(me)

    def _deadline(self) -> float:
        c = FlLease()

        def read(k: c_void_p) -> float:
            lib.fl_keepalive_status(k, byref(c))
            return int(c.deadline_ns) / 1e9
        # stopping: the lease's own deadline (stop() brings it up to date)
        return self._reading(read, lambda: int(self._lease._c.deadline_ns) / 1e9)

    @property
    def lost(self) -> bool:
        """True once a renewal failed."""
        return self._reading(lambda k: int(lib.fl_keepalive_status(k, None)) != 0,
                             lambda: self.error is not None)

    def fileno(self) -> int:
        """An eventfd that becomes readable when the lease is lost (for select/poll).  It
        is closed by stop(), as a file's descriptor by close()."""
        def stopped() -> int:
            raise ValueError("keepalive is stopped")
        return self._reading(lambda k: int(lib.fl_keepalive_fd(k)), stopped)

    def stop(self) -> None:
        """Stop renewing; the lease keeps its latest deadline.  Raises OwnershipLost (or the
        error that lost it) if a renewal had failed.  Safe to call again, and from an
        on_lost callback."""
        if os.getpid() != self._region._pid:
            raise ForkedHandle(errno.ECHILD, None, "a keepalive belongs to the process that "
                               "started it (its thread exists only there); a fork() child "
                               "must not stop it")
        # A call in flight of the Region, registered before k is taken: a close() on
        # another thread that finds k gone waits for this stop before fl_close() frees
        # the keeper (the module's Dekker pair).
        region, me = self._region, _get_ident()
        region._active.append(me)
        try:
            k = self._take()
            if k is None:
                return
            self._stopped(k)
        finally:
            region._call_ended(me)

    def _take(self) -> Optional[c_void_p]:
        """The C keepalive, taken out (None once taken): readers see it no more."""
        with self._lock:
            k, self._k = self._k, None
        return k

    def _stopped(self, k: c_void_p) -> None:
        """fl_keepalive_stop of the taken k, and the bookkeeping; raises its error."""
        c = FlLease()
        rc = int(lib.fl_keepalive_stop(k, byref(c)))
        detail = cast(bytes, _last_error_fn()).decode("utf-8", "replace") if rc < 0 else ""
        with self._region._ka_lock:
            self._region._keepalives.discard(self)
        if self._lease._keepalive is self:
            self._lease._keepalive = None
        if c.token == self._lease._c.token:
            self._lease._c.deadline_ns = c.deadline_ns
        if _in_callback():
            # On the keepalive thread, which may be returning through this very thunk
            # (a stop from our own on_lost): never free it.
            _retired_thunks.append(self._cb)
        self._cb = None  # fl_keepalive_stop waited for any running callback of k
        if rc < 0:
            err = _errors._CLASSES.get(-rc, _errors.Error)(
                -rc, None, f"keepalive of key {self._lease.key!r}: {detail}")
            if self.error is None:  # lost, its callback skipped (a close() in another)
                self.error = err
            raise err

    def __enter__(self) -> "Keepalive":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is None:
            self.stop()
            return
        try:
            self.stop()
        except Exception as e:
            exc.add_note(f"fencelock: stopping the keepalive on exit also failed: {e}")
