# SPDX-License-Identifier: MIT
"""Cancel (fl_cancel) and how a blocking acquire() in the main thread lets signals in.

Why the signal part: ctypes releases the GIL for the C call, and CPython's
C-level signal handler only records the signal; the Python handler (which
raises KeyboardInterrupt for SIGINT) runs when the main thread is back in
the interpreter.  fl_acquire() does not end a wait for a signal (it goes on
waiting after one), so `acquire(key, timeout=None)` would ignore Ctrl-C
forever.

How: a wait in the main thread runs as fl_acquire_cancelable() with this
process's own fl_cancel (_SIGNAL_CANCEL).  During the wait, the main thread's
signal.set_wakeup_fd() is a pipe read by a helper thread (_Watcher, started
on the first such wait): CPython's C handler writes the signal's number to
it, the helper passes the byte on to the wakeup fd that was set before (so
asyncio and others still see it) and calls fl_cancel_trigger().  The wait
returns -ECANCELED, the binding runs the pending Python handlers at once
(PyErr_CheckSignals): KeyboardInterrupt (or whatever a handler raises)
propagates; a handler that returns lets the wait go on, with the time that
is left (PEP 475's rule for system calls).  Why not waits in short slices:
each slice would count as a timeout in the key's counters, and Ctrl-C would
take up to a slice.  Other threads are unaffected: Python runs signal
handlers only in the main thread (end their waits with a Cancel).
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
from types import TracebackType
from typing import Any, Optional, Set, Type

from . import _errors
from ._native import has, lib


def _new_cancel() -> ctypes.c_void_p:
    if not has("fl_cancel_new"):
        raise _errors.unsupported("fl_cancel_new")
    c = ctypes.c_void_p()
    rc = lib.fl_cancel_new(ctypes.byref(c))
    if rc < 0:
        _errors.raise_for(rc)
    return c


class Cancel:
    """A cancellation flag for waits (fl_cancel): acquire(key, cancel=c) raises Cancelled
    once c.cancel() is called, from any thread, before or during the wait.

    The flag stays set until reset(), so a cancel() just before the wait begins is not
    lost and every later wait given c ends at once.  A key that is free is still acquired
    while the flag is set: cancellation ends waiting only.  One Cancel may serve several
    waits at once (every one of them ends).  As a context manager it is closed on exit;
    close() frees the C object once no wait uses it any more."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # RLock: cancel() may run in a signal handler
        self._users = 0
        self._closing = False
        self._links: Set[int] = set()  # the process's signal cancel, while a main-thread wait uses it
        self._c: Optional[ctypes.c_void_p] = _new_cancel()

    def cancel(self) -> None:
        """Set the flag and end the waits that use it.  Any thread; also from a Python
        signal handler.  Does nothing after close()."""
        with self._lock:
            if self._c is not None:
                lib.fl_cancel_trigger(self._c)
            for c in self._links:
                lib.fl_cancel_trigger(c)

    def reset(self) -> None:
        """Clear the flag, for the next wait."""
        with self._lock:
            if self._c is None:
                raise ValueError("operation on a closed fencelock.Cancel")
            lib.fl_cancel_reset(self._c)

    @property
    def cancelled(self) -> bool:
        """True once cancel() was called (and reset() not since)."""
        with self._lock:
            return self._c is not None and int(lib.fl_cancel_is_triggered(self._c)) == 1

    def close(self) -> None:
        """Free the C object (at the end of the last wait still using it).  Safe to call
        again; cancel() afterwards does nothing."""
        with self._lock:
            self._closing = True
            if self._users == 0:
                self._free()

    def _free(self) -> None:
        c, self._c = self._c, None
        if c is not None:
            lib.fl_cancel_free(c)

    # Used by Region.acquire around its C call.
    def _enter(self, link: Optional[ctypes.c_void_p] = None) -> ctypes.c_void_p:
        with self._lock:
            if self._c is None or self._closing:
                raise ValueError("operation on a closed fencelock.Cancel")
            self._users += 1
            if link is not None:
                self._links.add(link.value or 0)
                if lib.fl_cancel_is_triggered(self._c):
                    lib.fl_cancel_trigger(link)
            return self._c

    def _exit(self, link: Optional[ctypes.c_void_p] = None) -> None:
        with self._lock:
            if link is not None:
                self._links.discard(link.value or 0)
            self._users -= 1
            if self._closing and self._users == 0:
                self._free()

    def __enter__(self) -> "Cancel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_c", None) is not None and self._users == 0:
            self._free()

    def __reduce__(self) -> Any:
        raise TypeError("a fencelock.Cancel belongs to its process: it cannot be pickled")

    def __repr__(self) -> str:
        state = "closed" if self._c is None else ("cancelled" if self.cancelled else "armed")
        return f"<fencelock.Cancel {state}>"


_check_signals = ctypes.pythonapi.PyErr_CheckSignals
_check_signals.restype = ctypes.c_int
_check_signals.argtypes = []


def check_signals() -> None:
    """Run the Python signal handlers now (raises what they raise, KeyboardInterrupt)."""
    _check_signals()  # ctypes.pythonapi raises the exception a handler set


class _Watcher:
    """The process's signal pipe, its helper thread and its fl_cancel (see the module)."""

    def __init__(self) -> None:
        self.cancel = _new_cancel()  # never freed: the helper may trigger it at any time
        self.forward = -1  # the wakeup fd to pass bytes on to
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(r, True)
        self.r, self.w = r, w
        self.pid = os.getpid()
        threading.Thread(target=self._run, name="fencelock-signals", daemon=True).start()

    def _run(self) -> None:
        r = self.r
        while True:
            try:
                data = os.read(r, 512)
            except InterruptedError:
                continue
            except OSError:
                return
            if not data:
                return
            fwd = self.forward
            if fwd >= 0:
                try:
                    os.write(fwd, data)
                except OSError:
                    pass  # full or closed: CPython's own handler would drop it too
            lib.fl_cancel_trigger(self.cancel)


_watcher: Optional[_Watcher] = None
_watcher_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # The helper thread does not exist in the child: the next wait starts a new one.
    global _watcher
    _watcher = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def watcher() -> Optional[_Watcher]:
    """The process's _Watcher, or None where signals cannot be watched (not the main thread,
    an old library)."""
    global _watcher
    if threading.current_thread() is not threading.main_thread() or not has(
            "fl_acquire_cancelable"):
        return None
    with _watcher_lock:
        if _watcher is None or _watcher.pid != os.getpid():
            _watcher = _Watcher()
        return _watcher


class SignalWait:
    """Context manager around one C wait in the main thread: the wakeup fd is the watcher's
    pipe inside it, the previous one outside."""

    def __init__(self, w: _Watcher) -> None:
        self.w = w
        self.old: Optional[int] = None

    def __enter__(self) -> Optional["SignalWait"]:
        try:
            old = signal.set_wakeup_fd(self.w.w)
        except ValueError:  # not the main interpreter's main thread after all
            self.old = None
            return None
        self.old = old
        if old != self.w.w:  # a nested wait (from a handler) keeps the outer one's
            self.w.forward = old
        return self

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            signal.set_wakeup_fd(self.old)
