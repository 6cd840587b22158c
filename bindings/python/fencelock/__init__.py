# SPDX-License-Identifier: MIT
"""fencelock: leased locks with fencing tokens, for the processes of one host.

A pure-Python binding (ctypes) of libfencelock; see include/fencelock.h for the
semantics of every call and bindings/python/README.md for an overview.

    import fencelock
    with fencelock.open(path) as region:
        with region.acquire("jobs/42", lease=5.0, timeout=1.0) as lease:
            region.commit(lease, "jobs/42/state", b"done")

The C library is found through $FENCELOCK_LIB, then beside an installed
package, then on the loader's path; importing fails (ImportError) if its
major version is not the one this binding mirrors (version() says which
library version is loaded).  Waits: acquire(..., cancel=Cancel()) ends with
Cancelled from any thread, and a wait in the main thread ends on a signal
(Ctrl-C raises KeyboardInterrupt even with timeout=None): see _cancel.py.
"""
from __future__ import annotations

from ._cancel import Cancel
from ._version import __version__
from ._errors import (Busy, Cancelled, Closed, Deadlock, Error, ForkedHandle, NotFound,
                      OwnershipLost, ScopeMismatch, StaleFence, err_name, strerror)
from ._info import (ClientInfo, LeaseFlag, LockInfo, LockState, Op, RecordInfo, RegionInfo,
                    RunState, UnregisteredInfo)
from ._native import KEY_MAX, TOKEN_EPOCH_SHIFT, TOKEN_MAX, UNREGISTERED_MAX
from ._region import (SECONDS_MAX, Keepalive, Key, Lease, Region, default_region_path, open,
                      version, version_number)

__all__ = [
    "__version__", "open", "Region", "Key", "Lease", "Keepalive", "Cancel", "default_region_path", "strerror",
    "err_name", "version", "version_number", "Error", "Busy", "OwnershipLost", "StaleFence",
    "ScopeMismatch", "ForkedHandle", "NotFound", "Deadlock", "Cancelled", "Closed", "RegionInfo",
    "LockInfo", "RecordInfo", "ClientInfo", "UnregisteredInfo", "KEY_MAX", "TOKEN_MAX",
    "TOKEN_EPOCH_SHIFT", "UNREGISTERED_MAX", "token_epoch", "token_counter", "LockState",
    "RunState", "Op", "LeaseFlag", "SECONDS_MAX",
]


def token_epoch(token: int) -> int:
    """FL_TOKEN_EPOCH(): the supervisor epoch a token belongs to."""
    return token >> TOKEN_EPOCH_SHIFT


def token_counter(token: int) -> int:
    """FL_TOKEN_COUNTER(): the acquisition count within the epoch."""
    return token & ((1 << TOKEN_EPOCH_SHIFT) - 1)
