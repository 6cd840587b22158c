# SPDX-License-Identifier: MIT
"""Region, Lease and Keepalive: the Python face of fl_region, fl_lease and fl_keepalive.

Threads: a Region may be shared by the threads of a process, as the C handle
may (ctypes releases the GIL during every call, so a thread waiting in
acquire() does not stop the others).  A Lease is a value: use one lease from
one thread at a time.  close() must not race with calls on other threads, as
with a file descriptor: finish them first.

Fork: a Region (and its leases and keepalives) belongs to the process that
opened it.  In a fork() child every call raises ForkedHandle; the child opens
the region itself.  A Region cannot be pickled (multiprocessing's spawn): pass
its path and open it in the other process.
"""
import ctypes
import errno
import operator
import os
import threading
import time
from ctypes import byref, c_size_t, c_uint64

from . import _cancel, _errors
from ._errors import ForkedHandle, OwnershipLost, StaleFence, raise_for
from ._info import ClientInfo, LockInfo, RecordInfo, RegionInfo, UnregisteredInfo
from ._native import (COMMIT_STRICT, LEASE_EXPIRED, LEASE_OWNER_DIED, LOST_FN, TOKEN_MAX,
                      UNREGISTERED_MAX, WAIT_FOREVER, FlClientInfo, FlKey, FlLease, FlLockInfo,
                      FlRecordInfo, FlRegionInfo, FlUnregisteredInfo, has, lib)

_ENOENT, _ERANGE, _ENOBUFS = errno.ENOENT, errno.ERANGE, errno.ENOBUFS
_ESTALE, _ENAMETOOLONG, _ECANCELED = errno.ESTALE, errno.ENAMETOOLONG, errno.ECANCELED


def version():
    """fl_version(): the loaded C library's version, "MAJOR.MINOR.PATCH"."""
    if not has("fl_version"):
        raise _errors.unsupported("fl_version")
    return lib.fl_version().decode("ascii", "replace")


def version_number():
    """fl_version_number(): the loaded C library's version as 0xMMmmpp (compares as an
    int: version_number() >= 0x000100 for 0.1.0 or newer)."""
    if not has("fl_version_number"):
        raise _errors.unsupported("fl_version_number")
    return int(lib.fl_version_number())


def _name(s, what):
    """A key or record name as the C library takes it (UTF-8 for str)."""
    if isinstance(s, str):
        return s.encode("utf-8")
    if isinstance(s, (bytes, bytearray)):
        return bytes(s)
    raise TypeError(f"{what} must be str or bytes, not {type(s).__name__}")


def _ns(seconds, what):
    """Seconds (a float) -> nanoseconds, at least 1 for a positive duration."""
    if seconds is None or seconds != seconds or seconds <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, not {seconds!r}")
    return max(1, round(seconds * 1e9))


def default_region_path():
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


def open(region=None, *, readonly=False):  # noqa: A001 - the API's name
    """Open a region (None: $FENCELOCK_REGION, else default_region_path()) and register
    with its supervisor.  readonly=True maps it for inspection only (info(), locks(),
    records(), clients(), read()).  Returns a Region, a context manager that closes it."""
    return Region(region, readonly=readonly)


class Region:
    """One open region (fl_region).  Use as a context manager, or call close()."""

    def __init__(self, region=None, *, readonly=False):
        self._h = None
        self._pid = os.getpid()
        self._keepalives = set()
        self._ka_lock = threading.Lock()
        path = None if region is None else os.fsencode(region)
        h = ctypes.c_void_p()
        fn = lib.fl_open_readonly if readonly else lib.fl_open
        rc = fn(path, byref(h))
        if rc < 0:
            raise_for(rc)
        self._h = h
        self.readonly = readonly

    # -- life cycle --------------------------------------------------------

    def close(self):
        """Stop this region's keepalives and close the handle; locks still held through it
        are released as if the process had died.  Safe to call again.  In a fork() child it
        only unmaps the child's copy (the parent's keepalives and locks are left alone)."""
        h, self._h = self._h, None
        if h is None:
            return
        if os.getpid() == self._pid:
            for k in list(self._keepalives):
                try:
                    k.stop()
                except _errors.Error:
                    pass  # lost: the lease is gone anyway
        lib.fl_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        raise TypeError("a fencelock Region cannot be pickled or sent to another process: "
                        "pass its path (region.path) and call fencelock.open(path) there")

    def __repr__(self):
        if self._h is None:
            return "<fencelock.Region closed>"
        return f"<fencelock.Region {self.path!r} registered={self.registered}>"

    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        h = self._h
        if h is None:
            raise ValueError("operation on a closed fencelock Region")
        return h

    @property
    def path(self):
        """The region file this handle maps."""
        return os.fsdecode(lib.fl_region_path(self._handle()))

    @property
    def registered(self):
        """True if registered with a supervisor (death detection on)."""
        return lib.fl_region_registered(self._handle()) == 1

    # -- locks ---------------------------------------------------------------

    def resolve(self, key):
        """Look key up once (fl_key_resolve), creating it as acquire() would (nothing is
        acquired), and return a Key: acquire(that Key) takes the same lock, with the same
        tokens, without looking the name up again.  A Key belongs to this Region (another
        Region refuses it).  Raises Error EINVAL for a bad key, ENOSPC if the key is new
        and the region's lock table is full."""
        if not has("fl_key_resolve"):
            raise _errors.unsupported("fl_key_resolve")
        c = FlKey()
        rc = lib.fl_key_resolve(self._handle(), _name(key, "key"), byref(c))
        if rc < 0:
            raise_for(rc, f"key {key!r}")
        return Key(self, key, c)

    def acquire(self, key, lease=30.0, timeout=None, cancel=None):
        """Acquire key's lock for lease seconds.  key: a name (str or bytes), or a Key
        from resolve() (the same lock, without the name's lookup).  timeout: None waits
        forever, 0 tries once, > 0 waits at most that many seconds.  Returns a Lease (a
        context manager that releases it).

        cancel: a fencelock.Cancel; its cancel(), from any thread, ends the wait with
        Cancelled (a free key is still acquired).

        Signals: a wait in the main thread ends when a signal with a Python handler
        arrives, runs the handler at once, and raises what it raises: Ctrl-C
        (KeyboardInterrupt) ends even a timeout=None wait.  A handler that returns lets
        the wait go on for the time left.  (The C wait is fl_acquire_cancelable with a
        cancel that a helper thread triggers from signal.set_wakeup_fd's pipe; the
        wakeup fd set before is restored afterwards and sees every signal too.)  Waits
        in other threads ignore signals: end them with a Cancel.

        Raises Busy if the key stayed held, Deadlock if the calling thread holds it
        already through this Region (a wait could only take its own lease over),
        Cancelled."""
        if isinstance(key, Key):
            k, name = key._for(self), key.name
            acq, acq_cancelable = lib.fl_acquire_key, lib.fl_acquire_key_cancelable
        else:
            k, name = _name(key, "key"), key
            acq, acq_cancelable = lib.fl_acquire, lib.fl_acquire_cancelable
        lease_ns = _ns(lease, "lease")
        if timeout is None:
            timeout_ns = WAIT_FOREVER
        elif timeout == 0:
            timeout_ns = 0
        else:
            timeout_ns = _ns(timeout, "timeout")
        if cancel is not None and not isinstance(cancel, _cancel.Cancel):
            raise TypeError(f"cancel must be a fencelock.Cancel, not {type(cancel).__name__}")
        h = self._handle()
        c = FlLease()
        w = _cancel.watcher() if timeout_ns != 0 else None
        if w is not None:
            rc, detail = self._wait_main(acq_cancelable, h, k, lease_ns, timeout_ns, cancel, c,
                                         w)
        elif cancel is not None:
            cc = cancel._enter()
            try:
                rc = acq_cancelable(h, k, lease_ns, timeout_ns, cc, byref(c))
                detail = lib.fl_last_error() if rc < 0 else None
            finally:
                cancel._exit()
        else:
            rc = acq(h, k, lease_ns, timeout_ns, byref(c))
            detail = lib.fl_last_error() if rc < 0 else None
        if rc < 0:
            raise_for(rc, f"key {name!r}", detail=detail.decode("utf-8", "replace"))
        return Lease(self, name, c, lease)

    @staticmethod
    def _wait_main(acq_cancelable, h, k, lease_ns, timeout_ns, cancel, c, w):
        """A wait in the main thread, ended by signals (see acquire and _cancel.py).
        Returns (rc, fl_last_error() bytes or None)."""
        deadline = None if timeout_ns == WAIT_FOREVER else time.monotonic_ns() + timeout_ns
        sig = w.cancel
        user = cancel._enter(link=sig) if cancel is not None else None
        try:
            with _cancel.SignalWait(w):
                t = timeout_ns
                while True:
                    lib.fl_cancel_reset(sig)
                    if user is not None and lib.fl_cancel_is_triggered(user):
                        lib.fl_cancel_trigger(sig)
                    _cancel.check_signals()  # those that came before the pipe was set
                    rc = acq_cancelable(h, k, lease_ns, t, sig, byref(c))
                    detail = lib.fl_last_error() if rc < 0 else None
                    if rc != -_ECANCELED or (user is not None
                                             and lib.fl_cancel_is_triggered(user)):
                        return rc, detail
                    _cancel.check_signals()  # KeyboardInterrupt, or what a handler raises
                    if deadline is not None:  # a handler returned: wait on, time left
                        t = max(1, deadline - time.monotonic_ns())
        finally:
            if cancel is not None:
                cancel._exit(link=sig)

    # -- fenced records ------------------------------------------------------

    def commit(self, lease, record, data, strict=False):
        """Commit data (bytes-like) to record, fenced by lease's token.  Returns the accepted
        token.  Raises StaleFence if the record accepted a greater token (an equal one too
        when strict), ScopeMismatch if the record belongs to another key."""
        data = bytes(data)
        accepted = c_uint64()
        rc = lib.fl_commit(self._handle(), byref(lease._c), _name(record, "record"), data,
                           len(data), COMMIT_STRICT if strict else 0, byref(accepted))
        if rc < 0:
            self._commit_failed(rc, lease.token, record, accepted)
        return accepted.value

    def commit_u64(self, lease, record, value, strict=False):
        """Commit one 64-bit unsigned number (the fenced-pointer pattern); as commit()."""
        accepted = c_uint64()
        rc = lib.fl_commit_u64(self._handle(), byref(lease._c), _name(record, "record"),
                               value, COMMIT_STRICT if strict else 0, byref(accepted))
        if rc < 0:
            self._commit_failed(rc, lease.token, record, accepted)
        return accepted.value

    def commit_token(self, key, token, record, data, strict=False):
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
        token = operator.index(token)
        if not 0 < token <= TOKEN_MAX:
            raise ValueError(f"token must be in 1..{TOKEN_MAX}, not {token}")
        data = bytes(data)
        accepted = c_uint64()
        rc = lib.fl_commit_token(self._handle(), _name(key, "key"), token,
                                 _name(record, "record"), data, len(data),
                                 COMMIT_STRICT if strict else 0, byref(accepted))
        if rc == -_ENOENT:
            raise_for(rc, f"key {key!r}", _errors.NotFound)
        if rc < 0:
            self._commit_failed(rc, token, record, accepted)
        return accepted.value

    @staticmethod
    def _commit_failed(rc, token, record, accepted):
        if rc == -_ESTALE:
            raise_for(rc, f"record {record!r}", StaleFence, token=token,
                      accepted=accepted.value)
        raise_for(rc, f"record {record!r}")

    def read(self, record):
        """The record's current value and the token that wrote it: (data, fence).
        Raises NotFound (a KeyError) if it was never committed."""
        h = self._handle()
        name = _name(record, "record")
        cap = 256
        n, fence = c_size_t(), c_uint64()
        while True:
            buf = ctypes.create_string_buffer(cap)
            rc = lib.fl_read(h, name, buf, cap, byref(n), byref(fence))
            if rc == -_ENOBUFS:
                cap = max(n.value, cap * 2)  # grown meanwhile: try again
                continue
            if rc < 0:
                raise_for(rc, f"record {record!r}",
                          _errors.NotFound if rc == -_ENOENT else None)
            return buf.raw[:n.value], fence.value

    def read_u64(self, record):
        """A record holding one 64-bit number: (value, fence)."""
        value, fence = c_uint64(), c_uint64()
        rc = lib.fl_read_u64(self._handle(), _name(record, "record"), byref(value), byref(fence))
        if rc < 0:
            raise_for(rc, f"record {record!r}", _errors.NotFound if rc == -_ENOENT else None)
        return value.value, fence.value

    # -- inspection ----------------------------------------------------------

    def info(self):
        """The region's header and counters (RegionInfo)."""
        c = FlRegionInfo()
        rc = lib.fl_region_info_get(self._handle(), byref(c))
        if rc < 0:
            raise_for(rc)
        return RegionInfo.from_c(c)

    def _table(self, fn, cls, ctype, first, last):
        out = []
        h = self._handle()
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

    def locks(self):
        """Every lock slot with a published key (list of LockInfo)."""
        n = self.info().locks_used
        return self._table(lib.fl_lock_info_get, LockInfo, FlLockInfo, 0, n - 1)

    def records(self):
        """Every record (list of RecordInfo)."""
        n = self.info().records_used
        return self._table(lib.fl_record_info_get, RecordInfo, FlRecordInfo, 0, n - 1)

    def clients(self):
        """Every live client of the supervisor's table (list of ClientInfo)."""
        n = self.info().client_capacity
        return self._table(lib.fl_client_info_get, ClientInfo, FlClientInfo, 1, n)

    def unregistered(self):
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

    def __init__(self, region, name, c):
        self.name = name
        self._region = region
        self._c = c

    @property
    def slot(self):
        """The backend's number of the key (a region file: its lock slot)."""
        return self._c.slot

    def _for(self, region):
        """The C key handle, for a call on region: ValueError if another Region made it."""
        if region is not self._region:
            raise ValueError(f"key handle {self.name!r} was resolved by another Region: a Key "
                             "is valid only with the Region that resolved it (resolve it there)")
        return byref(self._c)

    def __repr__(self):
        return f"<fencelock.Key {self.name!r} slot={self.slot}>"

    def __reduce__(self):
        raise TypeError("a fencelock Key cannot be pickled or sent to another process: "
                        "resolve the key there")


class Lease:
    """One acquisition: token, key, deadline (time.monotonic() seconds), and the previous
    holder's fate (expired_previous, owner_died_previous).  As a context manager it releases
    on exit; on exit by an exception a failed release is added to that exception as a note
    instead of replacing it."""

    def __init__(self, region, key, c, lease_len):
        self._region = region
        self._c = c
        self._len = lease_len
        self._done = False
        self._keepalive = None
        self.key = key
        self.token = c.token
        self.expired_previous = bool(c.flags & LEASE_EXPIRED)
        self.owner_died_previous = bool(c.flags & LEASE_OWNER_DIED)

    @property
    def deadline(self):
        """When the lease ends unless renewed, in time.monotonic() seconds.  While a
        keepalive runs this is its latest renewal."""
        k = self._keepalive
        if k is not None and k._k is not None:
            return k._deadline()
        return self._c.deadline_ns / 1e9

    def remaining(self):
        """Seconds left until deadline (negative once past)."""
        return self.deadline - time.monotonic()

    def __repr__(self):
        return f"<fencelock.Lease key={self.key!r} token={self.token}>"

    def renew(self, lease=None):
        """Extend the lease to now + lease seconds (None: the length it was acquired with).
        Raises OwnershipLost if it expired and was taken over."""
        if lease is not None:
            self._len = lease
        rc = lib.fl_renew(self._region._handle(), byref(self._c), _ns(self._len, "lease"))
        if rc < 0:
            raise_for(rc, f"key {self.key!r}")

    def release(self):
        """Release the lock.  Raises OwnershipLost if it was taken over meanwhile (or was
        released before)."""
        if self._keepalive is not None:
            try:
                self._keepalive.stop()
            except OwnershipLost:
                pass  # a lease that expired but was not taken over still releases (0)
        rc = lib.fl_release(self._region._handle(), byref(self._c))
        if rc < 0:
            raise_for(rc, f"key {self.key!r}")
        self._done = True

    def check(self):
        """True while this lease is its key's current, unexpired holding.  One atomic read:
        for stopping a long job early, never instead of the fenced commit."""
        rc = lib.fl_check(self._region._handle(), byref(self._c))
        if rc == 0:
            return True
        if rc == -_ESTALE:
            return False
        raise_for(rc, f"key {self.key!r}")

    def keep_alive(self, on_lost=None, lease=None):
        """Keep the lease renewed from the library's background thread (each renewal to now
        + lease seconds; None: the acquired length).  on_lost(lease, error), if given, is
        called on that thread when a renewal fails (error: OwnershipLost, or another Error).
        Returns a Keepalive (stop() it, or use it as a context manager)."""
        if self._keepalive is not None:
            raise ValueError(f"lease {self!r} already has a keepalive")
        k = Keepalive(self, on_lost, self._len if lease is None else lease)
        self._keepalive = k
        return k

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
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
    delays the renewal of the region's other leases while it holds the GIL), do not call
    stop() from it, and hand work to other threads (a queue, an Event).  Exceptions it
    raises go to sys.unraisablehook.  The callback object is kept alive until stop()."""

    def __init__(self, lease, on_lost, lease_len):
        self._lease = lease
        self._region = lease._region
        self._on_lost = on_lost
        self._in_callback = threading.local()
        self.error = None  # the exception that lost the lease, once lost
        # The C function pointer must outlive every call the library may make: kept on
        # self, and self is kept in the region's set until stop().
        self._cb = LOST_FN(self._lost)
        k = ctypes.c_void_p()
        rc = lib.fl_keepalive_start(self._region._handle(), byref(lease._c),
                                    _ns(lease_len, "lease"), self._cb, None, byref(k))
        if rc < 0:
            raise_for(rc, f"key {lease.key!r}")
        self._k = k
        with self._region._ka_lock:
            self._region._keepalives.add(self)

    def _lost(self, _arg, _c, err):
        self.error = _errors._CLASSES.get(-err, _errors.Error)(
            -err, None, f"keepalive of key {self._lease.key!r}")
        if self._on_lost is not None:
            self._in_callback.active = True
            try:
                self._on_lost(self._lease, self.error)
            finally:
                self._in_callback.active = False

    def _deadline(self):
        c = FlLease()
        lib.fl_keepalive_status(self._k, byref(c))
        return c.deadline_ns / 1e9

    @property
    def lost(self):
        """True once a renewal failed."""
        if self._k is None:
            return self.error is not None
        return lib.fl_keepalive_status(self._k, None) != 0

    def fileno(self):
        """An eventfd that becomes readable when the lease is lost (for select/poll)."""
        if self._k is None:
            raise ValueError("keepalive is stopped")
        return lib.fl_keepalive_fd(self._k)

    def stop(self):
        """Stop renewing; the lease keeps its latest deadline.  Raises OwnershipLost (or the
        error that lost it) if a renewal had failed.  Safe to call again."""
        if getattr(self._in_callback, "active", False):
            raise RuntimeError("Keepalive.stop() called from its on_lost callback")
        if os.getpid() != self._region._pid:
            raise ForkedHandle(errno.ECHILD, None, "a keepalive belongs to the process that started it "
                               "(its thread exists only there); a fork() child must not stop it")
        k, self._k = self._k, None
        if k is None:
            return
        c = FlLease()
        rc = lib.fl_keepalive_stop(k, byref(c))
        detail = lib.fl_last_error().decode("utf-8", "replace") if rc < 0 else ""
        with self._region._ka_lock:
            self._region._keepalives.discard(self)
        if self._lease._keepalive is self:
            self._lease._keepalive = None
        if c.token == self._lease._c.token:
            self._lease._c.deadline_ns = c.deadline_ns
        self._cb = None  # stop() waited for the keeper thread: no more calls
        if rc < 0:
            raise _errors._CLASSES.get(-rc, _errors.Error)(
                -rc, None, f"keepalive of key {self._lease.key!r}: {detail}")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.stop()
            return
        try:
            self.stop()
        except Exception as e:
            exc.add_note(f"fencelock: stopping the keepalive on exit also failed: {e}")
