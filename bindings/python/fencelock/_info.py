# SPDX-License-Identifier: MIT
"""Dataclasses for the inspection API (fl_*_info_get), built from the ctypes structs.

Each dataclass has the fields of its C struct, under the same names (the
reserved ones aside; test_structs checks that none is missing); char arrays
become str (decoded as names are, see _names.py), the C enumerations become
IntEnum/IntFlag members (an int still: comparisons with the C constants keep
working), durations stay in the C units the field names say (_ns).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, ClassVar, Dict, Type, TypeVar

from ._names import decode_name


class _Open:
    """A value a newer library may add is kept, as a pseudo-member named UNKNOWN_<n>."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, int):
            return None
        member: Any = int.__new__(cls, value)
        member._name_ = f"UNKNOWN_{value}"
        member._value_ = value
        return member


class LockState(_Open, enum.IntEnum):
    """LockInfo.state: FL_LOCK_FREE, FL_LOCK_HELD, FL_LOCK_EXPIRED."""
    FREE = 0
    HELD = 1
    EXPIRED = 2


class RunState(_Open, enum.IntEnum):
    """RegionInfo.run_state: FL_RUN_NEVER, FL_RUN_STARTED, FL_RUN_CLEAN."""
    NEVER = 0
    STARTED = 1
    CLEAN = 2


class Op(_Open, enum.IntEnum):
    """The operation a stale token was refused in (FL_OP_*; NONE: none yet)."""
    NONE = 0
    COMMIT = 1
    STRICT_COMMIT = 2
    RENEW = 3
    RELEASE = 4


class LeaseFlag(enum.IntFlag):
    """Lease flags (FL_LEASE_*); LockInfo.last_release: how the last holding ended
    (0: released)."""
    EXPIRED = 0x1
    OWNER_DIED = 0x2


_T = TypeVar("_T", bound="_FromC")


class _FromC:
    _enums: ClassVar[Dict[str, Any]] = {}

    @classmethod
    def from_c(cls: Type[_T], c: Any) -> _T:
        values: Dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v = getattr(c, f.name)
            if isinstance(v, bytes):  # a char array: NUL-terminated text
                v = decode_name(v)
            conv = cls._enums.get(f.name)
            values[f.name] = conv(v) if conv is not None else v
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class RegionInfo(_FromC):
    """fl_region_info: the region's header."""
    format_version: int
    lock_capacity: int
    locks_used: int
    record_capacity: int
    records_used: int
    record_size: int
    buffer_count: int
    client_capacity: int
    file_size: int
    created_unix_ns: int
    token_floor: int
    epoch: int
    run_state: RunState
    ready: int
    started_unix_ns: int
    clean_unix_ns: int
    supervisor_pid: int
    same_boot: int
    served: int
    records_unvouched: int
    events_dropped: int
    boot_id: str
    clients_refused: int
    _enums: ClassVar[Dict[str, Any]] = {"run_state": RunState}


@dataclasses.dataclass(frozen=True)
class LockInfo(_FromC):
    """fl_lock_info: one lock slot (key)."""
    key: str
    state: LockState
    token: int
    holder_pid: int
    holder_client: int
    holder_client_id: int
    lease_left_ns: int
    waiters: int
    last_release: LeaseFlag
    acquisitions: int
    contended: int
    expiries_taken: int
    deaths: int
    renewals: int
    renew_failed: int
    releases: int
    release_failed: int
    last_stale_token: int
    last_stale_pid: int
    last_stale_op: Op
    busy: int
    timeouts: int
    _enums: ClassVar[Dict[str, Any]] = {"state": LockState, "last_release": LeaseFlag,
                                        "last_stale_op": Op}


@dataclasses.dataclass(frozen=True)
class RecordInfo(_FromC):
    """fl_record_info: one fenced record."""
    name: str
    bound_key: str
    accepted_token: int
    version: int
    size: int
    last_rejected_pid: int
    commits: int
    rejections: int
    last_rejected_token: int
    last_rejected_accepted: int
    last_rejected_op: Op
    unvouched: int
    repeats: int
    _enums: ClassVar[Dict[str, Any]] = {"last_rejected_op": Op}


@dataclasses.dataclass(frozen=True)
class ClientInfo(_FromC):
    """fl_client_info: one registered client."""
    index: int
    pid: int
    uid: int
    attached: int
    client_id: int


@dataclasses.dataclass(frozen=True)
class UnregisteredInfo(_FromC):
    """fl_unregistered_info: a process that opened the region unregistered (no death
    detection).  reason is a negative errno (-ECONNREFUSED, -ENOENT: no supervisor
    listening; -EACCES: its socket refused the process); fencelock.err_name(reason)
    names it."""
    pid: int
    uid: int
    reason: int
    start_time: int
    opened_unix_ns: int


for _cls in (RegionInfo, LockInfo, RecordInfo, ClientInfo, UnregisteredInfo, LockState,
             RunState, Op, LeaseFlag):
    _cls.__module__ = "fencelock"
