# SPDX-License-Identifier: MIT
"""Exceptions: one class per error a caller handles differently, Error for the rest.

The C library's detailed message (fl_last_error()) is thread-local and valid
until the next fencelock call on the same thread, so raise_for() must be the
first thing called after a failing C call, in the same Python function, with
nothing in between that could call into the library.
"""
from __future__ import annotations

import errno as _errno
from typing import Any, Dict, NoReturn, Optional, Type

from ._native import lib


def strerror(err: int) -> str:
    """fl_strerror(): the library's short message for an errno value (either sign)."""
    return str(lib.fl_strerror(-abs(int(err))).decode("utf-8", "replace"))


def err_name(err: int) -> str:
    """fl_err_name(): the symbolic name of an errno value ("ESTALE"); "E?" when unknown."""
    return str(lib.fl_err_name(-abs(int(err))).decode("ascii", "replace"))


class Error(OSError):
    """A fencelock call failed.  errno (positive), strerror, .name ("EPROTO") and
    .detail (the library's fl_last_error() text for this failure)."""

    errno: int
    strerror: str

    def __init__(self, err: int, message: Optional[str] = None, detail: str = "") -> None:
        err = abs(int(err))
        super().__init__(err, message if message is not None else strerror(err))
        self.name = err_name(err)
        self.detail = detail

    def __str__(self) -> str:
        s = f"{self.name}: {self.strerror}"
        if self.detail and self.detail not in s:
            s += f": {self.detail}"
        return s

    def __reduce__(self) -> Any:  # picklable (multiprocessing sends exceptions back)
        return (_rebuild, (type(self), self.errno, self.strerror, self.detail, self.__dict__))


def _rebuild(cls: Type[Error], err: int, message: str, detail: str,
             state: Dict[str, Any]) -> Error:
    e = cls.__new__(cls)
    Error.__init__(e, err, message, detail)
    e.__dict__.update(state)
    return e


class Busy(Error):
    """Not acquired in time: the key stayed held (EBUSY for a try, ETIMEDOUT for a wait)."""


class OwnershipLost(Error):
    """ESTALE: the lease is no longer the key's current holding (it expired and was taken
    over, or was released).  Stop the work; never retry with the same token."""


class StaleFence(OwnershipLost):
    """A commit was rejected: the record already accepted a greater token (or an equal one
    for a strict commit).  .token is the rejected token, .accepted the record's."""

    def __init__(self, err: int, message: Optional[str] = None, detail: str = "",
                 token: int = 0, accepted: int = 0) -> None:
        super().__init__(err, message, detail)
        self.token = token
        self.accepted = accepted

    def __str__(self) -> str:
        return (f"{super().__str__()} (token {self.token}, record accepted {self.accepted})")


class ScopeMismatch(Error):
    """EXDEV: the record is fenced by another key than the lease's (I8)."""


class ForkedHandle(Error):
    """ECHILD: a Region used in a process other than the one that opened it (a fork()
    child).  Open the region again in the child: fencelock.open(path)."""


class NotFound(Error, KeyError):
    """ENOENT: a name looked up does not exist.  From read() and read_u64(): the record was
    never committed; from commit_token(): the key was never acquired in this region (it
    issued no token, so no token of it can be valid).  Also a KeyError."""

    def __str__(self) -> str:  # KeyError.__str__ would show repr(args)
        return Error.__str__(self)


class Deadlock(Error):
    """EDEADLK from a waiting acquire(): the calling thread already holds the key, through
    this Region, by an unexpired lease of its latest acquisition.  The wait could only end
    at that lease's deadline by taking it over (making the thread's own lease stale), so it
    is refused at once: nothing changed, no token consumed.  Release the lease first, or
    wait from another Region handle (another thread sharing this Region still waits)."""


class Closed(Error, ValueError):
    """EBADF: the Region was closed: before the call, or during it (close() from another
    thread or a signal handler ends the calls in flight, waits included, with Closed).
    Also a ValueError, as operations on a closed file raise."""

    def __init__(self, err: int = _errno.EBADF, message: Optional[str] = None,
                 detail: str = "the fencelock Region is closed") -> None:
        super().__init__(err, message if message is not None else "Region closed", detail)


class Cancelled(Error):
    """ECANCELED: acquire(cancel=c) gave up waiting because c.cancel() was called (before or
    during the wait).  Nothing is held and no token was consumed."""


# errno -> class.  Errors not listed are Error.  One line per new class.
_CLASSES: Dict[int, Type[Error]] = {
    _errno.EBUSY: Busy,
    _errno.ETIMEDOUT: Busy,
    _errno.ESTALE: OwnershipLost,
    _errno.EXDEV: ScopeMismatch,
    _errno.ECHILD: ForkedHandle,
    _errno.EDEADLK: Deadlock,
    _errno.ECANCELED: Cancelled,
    _errno.EBADF: Closed,
}


def unsupported(name: str) -> NotImplementedError:
    """The loaded library is older than this binding and lacks the C function name."""
    return NotImplementedError(f"fencelock: the loaded libfencelock has no {name}() (it is "
                               f"older than this binding); upgrade the library")


def raise_for(rc: int, what: str = "", cls: Optional[Type[Error]] = None,
              detail: Optional[str] = None, **extra: Any) -> NoReturn:
    """Raise the exception for the negative errno rc, with fl_last_error()'s text (or
    detail, that text read earlier).  what: context put before the library's message (for
    example the key)."""
    if detail is None:
        detail = lib.fl_last_error().decode("utf-8", "replace")  # first: it is thread-local
    err = -rc
    if cls is None:
        cls = _CLASSES.get(err, Error)
    if cls is ForkedHandle:
        detail += ("; a Region belongs to the process that opened it: open the region again "
                   "in the child (fencelock.open(path))")
    if what:
        detail = f"{what}: {detail}" if detail else what
    raise cls(err, None, detail, **extra)
