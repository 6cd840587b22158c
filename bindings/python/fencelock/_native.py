# SPDX-License-Identifier: MIT
"""The C library, loaded with ctypes: where it is found, the structs, the prototypes.

Everything here mirrors include/fencelock.h and nothing else: no policy, no
exceptions other than ImportError when the library cannot be found or has
another major version than VERSION_MAJOR.

Adding a C function to the binding is one line in PROTOTYPES (and the method
that uses it).  A function this library build does not export is left unbound
(``has(name)`` says so), so the binding loads against an older library.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sysconfig
from typing import Any, Dict, List, Optional, Set, Tuple
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int, c_int32, c_int64,
                    c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

SONAME = "libfencelock.so.0"

# The library's major version this binding is written for (FL_VERSION_MAJOR).  A
# library of another major version has another ABI (docs/abi.md): import fails.
# A newer minor version is fine; an older one may lack functions (has()).
VERSION_MAJOR = 0

# Constants of fencelock.h.
KEY_MAX = 127
TOKEN_MAX = (1 << 63) - 1
TOKEN_EPOCH_SHIFT = 40
WAIT_FOREVER = -1
LEASE_EXPIRED = 0x1
LEASE_OWNER_DIED = 0x2
COMMIT_STRICT = 0x1
LOCK_FREE, LOCK_HELD, LOCK_EXPIRED = 0, 1, 2
BOOT_ID_SIZE = 40
UNREGISTERED_MAX = 32


class FlLease(Structure):
    _fields_ = [("token", c_uint64), ("deadline_ns", c_uint64), ("slot", c_uint32),
                ("flags", c_uint32), ("handle", c_uint64), ("region", c_uint64),
                ("reserved", c_uint64 * 3)]


class FlKey(Structure):
    _fields_ = [("slot", c_uint32), ("reserved0", c_uint32), ("handle", c_uint64),
                ("reserved", c_uint64 * 2)]


class FlRegionInfo(Structure):
    _fields_ = [
        ("format_version", c_uint32), ("lock_capacity", c_uint32), ("locks_used", c_uint32),
        ("record_capacity", c_uint32), ("records_used", c_uint32), ("record_size", c_uint32),
        ("buffer_count", c_uint32), ("client_capacity", c_uint32), ("file_size", c_uint64),
        ("created_unix_ns", c_uint64), ("token_floor", c_uint64), ("epoch", c_uint64),
        ("run_state", c_uint32), ("ready", c_uint32), ("started_unix_ns", c_uint64),
        ("clean_unix_ns", c_uint64), ("supervisor_pid", c_uint32), ("same_boot", c_int32),
        ("served", c_int32), ("records_unvouched", c_uint32), ("events_dropped", c_uint64),
        ("boot_id", c_char * BOOT_ID_SIZE), ("clients_refused", c_uint64),
        ("reserved", c_uint64 * 7)]


class FlLockInfo(Structure):
    _fields_ = [
        ("key", c_char * (KEY_MAX + 1)), ("state", c_int), ("token", c_uint64),
        ("holder_pid", c_uint32), ("holder_client", c_uint32), ("holder_client_id", c_uint64),
        ("lease_left_ns", c_int64), ("waiters", c_uint32), ("last_release", c_uint32),
        ("acquisitions", c_uint64), ("contended", c_uint64), ("expiries_taken", c_uint64),
        ("deaths", c_uint64), ("renewals", c_uint64), ("renew_failed", c_uint64),
        ("releases", c_uint64), ("release_failed", c_uint64), ("last_stale_token", c_uint64),
        ("last_stale_pid", c_uint32), ("last_stale_op", c_uint32), ("busy", c_uint64),
        ("timeouts", c_uint64), ("reserved", c_uint64 * 8)]


class FlRecordInfo(Structure):
    _fields_ = [
        ("name", c_char * (KEY_MAX + 1)), ("bound_key", c_char * (KEY_MAX + 1)),
        ("accepted_token", c_uint64), ("version", c_uint64), ("size", c_uint32),
        ("last_rejected_pid", c_uint32), ("commits", c_uint64), ("rejections", c_uint64),
        ("last_rejected_token", c_uint64), ("last_rejected_accepted", c_uint64),
        ("last_rejected_op", c_uint32), ("unvouched", c_uint32), ("repeats", c_uint64),
        ("reserved", c_uint64 * 8)]


class FlClientInfo(Structure):
    _fields_ = [("index", c_uint32), ("pid", c_uint32), ("uid", c_uint32),
                ("attached", c_uint32), ("client_id", c_uint64), ("reserved", c_uint64 * 8)]


class FlUnregisteredInfo(Structure):
    _fields_ = [("pid", c_uint32), ("uid", c_uint32), ("reason", c_int32),
                ("reserved0", c_uint32), ("start_time", c_uint64), ("opened_unix_ns", c_uint64),
                ("reserved", c_uint64 * 8)]


class FlEtcdEpochResult(Structure):
    _fields_ = [("before", c_uint64), ("after", c_uint64), ("asked", c_uint32),
                ("reserved0", c_uint32), ("reserved", c_uint64 * 5)]


# The structs the size test compares with the C header (C name -> ctypes class).
STRUCTS: Dict[str, Any] = {"fl_lease": FlLease, "fl_key": FlKey, "fl_region_info": FlRegionInfo,
           "fl_lock_info": FlLockInfo,
           "fl_record_info": FlRecordInfo, "fl_client_info": FlClientInfo,
           "fl_unregistered_info": FlUnregisteredInfo,
           "fl_etcd_epoch_result": FlEtcdEpochResult}

# void (*fl_lost_fn)(void *arg, const fl_lease *lease, int err)
LOST_FN = CFUNCTYPE(None, c_void_p, POINTER(FlLease), c_int)

_region_p = c_void_p  # fl_region * (opaque)
_keepalive_p = c_void_p  # fl_keepalive * (opaque)
_cancel_p = c_void_p  # fl_cancel * (opaque)
_u64p = POINTER(c_uint64)

# name -> (restype, argtypes), in the order of fencelock.h.
PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    "fl_version": (c_char_p, []),
    "fl_version_number": (c_uint, []),
    "fl_open": (c_int, [c_char_p, POINTER(_region_p)]),
    "fl_open_readonly": (c_int, [c_char_p, POINTER(_region_p)]),
    "fl_close": (None, [_region_p]),
    "fl_acquire": (c_int, [_region_p, c_char_p, c_uint64, c_int64, POINTER(FlLease)]),
    "fl_cancel_new": (c_int, [POINTER(_cancel_p)]),
    "fl_cancel_free": (None, [_cancel_p]),
    "fl_cancel_trigger": (None, [_cancel_p]),
    "fl_cancel_reset": (None, [_cancel_p]),
    "fl_cancel_is_triggered": (c_int, [_cancel_p]),
    "fl_acquire_cancelable": (c_int, [_region_p, c_char_p, c_uint64, c_int64, _cancel_p,
                                      POINTER(FlLease)]),
    "fl_key_resolve": (c_int, [_region_p, c_char_p, POINTER(FlKey)]),
    "fl_acquire_key": (c_int, [_region_p, POINTER(FlKey), c_uint64, c_int64, POINTER(FlLease)]),
    "fl_acquire_key_cancelable": (c_int, [_region_p, POINTER(FlKey), c_uint64, c_int64,
                                          _cancel_p, POINTER(FlLease)]),
    "fl_renew": (c_int, [_region_p, POINTER(FlLease), c_uint64]),
    "fl_release": (c_int, [_region_p, POINTER(FlLease)]),
    "fl_check": (c_int, [_region_p, POINTER(FlLease)]),
    "fl_commit": (c_int, [_region_p, POINTER(FlLease), c_char_p, c_void_p, c_size_t, c_uint,
                          _u64p]),
    "fl_commit_token": (c_int, [_region_p, c_char_p, c_uint64, c_char_p, c_void_p, c_size_t,
                                c_uint, _u64p]),
    "fl_read": (c_int, [_region_p, c_char_p, c_void_p, c_size_t, POINTER(c_size_t), _u64p]),
    "fl_commit_u64": (c_int, [_region_p, POINTER(FlLease), c_char_p, c_uint64, c_uint, _u64p]),
    "fl_read_u64": (c_int, [_region_p, c_char_p, _u64p, _u64p]),
    "fl_keepalive_start": (c_int, [_region_p, POINTER(FlLease), c_uint64, LOST_FN, c_void_p,
                                   POINTER(_keepalive_p)]),
    "fl_keepalive_fd": (c_int, [_keepalive_p]),
    "fl_keepalive_status": (c_int, [_keepalive_p, POINTER(FlLease)]),
    "fl_keepalive_stop": (c_int, [_keepalive_p, POINTER(FlLease)]),
    "fl_strerror": (c_char_p, [c_int]),
    "fl_err_name": (c_char_p, [c_int]),
    "fl_last_error": (c_char_p, []),
    "fl_default_region_path": (c_int, [c_char_p, c_size_t]),
    "fl_region_registered": (c_int, [_region_p]),
    "fl_region_path": (c_char_p, [_region_p]),
    "fl_region_backend": (c_char_p, [_region_p]),
    "fl_region_info_get": (c_int, [_region_p, POINTER(FlRegionInfo)]),
    "fl_lock_info_get": (c_int, [_region_p, c_uint32, POINTER(FlLockInfo)]),
    "fl_record_info_get": (c_int, [_region_p, c_uint32, POINTER(FlRecordInfo)]),
    "fl_client_info_get": (c_int, [_region_p, c_uint32, POINTER(FlClientInfo)]),
    "fl_unregistered_info_get": (c_int, [_region_p, c_uint32, POINTER(FlUnregisteredInfo)]),
    "fl_etcd_epoch": (c_int, [c_char_p, c_uint, c_uint64, POINTER(FlEtcdEpochResult)]),
}


# The functions every libfencelock since 0.0 has: the binding cannot work without them.
_CORE = ("fl_open", "fl_close", "fl_acquire", "fl_renew", "fl_release", "fl_commit", "fl_read",
         "fl_strerror", "fl_last_error")


def _candidates() -> Tuple[List[str], bool, List[str]]:
    """Where to look for the library, in order (bindings/python/README.md, "Finding the
    library"): the files to try, whether $FENCELOCK_LIB chose them, and the places beside
    the package that had no library (for the error message)."""
    env = os.environ.get("FENCELOCK_LIB")
    if env:
        # Explicit: only this one, so a wrong value is an error, not a fallback.
        return [env], True, []
    found: List[str] = []
    here = os.path.dirname(os.path.abspath(__file__))
    # An installed package: cmake --install writes the way from the package
    # to the library directory into _install_paths.py.
    try:
        from . import _install_paths  # type: ignore[attr-defined]
        found.append(os.path.normpath(os.path.join(here, _install_paths.LIBDIR_FROM_PACKAGE,
                                                   SONAME)))
    except ImportError:
        pass
    # <prefix>/lib[/<multiarch>]/python3/dist-packages/fencelock -> <prefix>/lib...
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    d = here
    for _ in range(5):
        d = os.path.dirname(d)
        for sub in ("", "lib", os.path.join("lib", multiarch) if multiarch else None, "lib64"):
            if sub is not None:
                found.append(os.path.join(d, sub, SONAME))
    found = list(dict.fromkeys(found))  # in order, once each
    files = [p for p in found if os.path.isfile(p)]
    missing = [os.path.dirname(p) for p in found if p not in files]
    # Then the loader's own path.
    files += [SONAME]
    name = ctypes.util.find_library("fencelock")
    if name and name != SONAME:
        files.append(name)
    return files, False, missing


def _not_found(errors: List[str], explicit: bool, missing: List[str]) -> str:
    """The ImportError's text when no library loads: every place tried, and how to fix it."""
    if explicit:
        return (f"fencelock: cannot load the C library FENCELOCK_LIB={errors[0]}; "
                f"set FENCELOCK_LIB=/path/{SONAME} to the library's file, or unset it to look "
                f"beside the package and on the loader's path")
    lines = [f"fencelock: cannot find the C library {SONAME}; tried:"]
    if missing:
        lines.append(f"  beside the package, no {SONAME} in: " + ", ".join(missing))
    lines += ["  " + e for e in errors]
    lines.append(f"Install libfencelock (cmake --install, or the system's package, so that the "
                 f"loader finds {SONAME}: ldconfig, LD_LIBRARY_PATH), or set "
                 f"FENCELOCK_LIB=/path/{SONAME}")
    return "\n".join(lines)


def load() -> Any:
    """Load libfencelock and bind PROTOTYPES.  ImportError names what was tried."""
    paths, explicit, missing = _candidates()
    errors = []
    for p in paths:
        try:
            lib = ctypes.CDLL(p, use_errno=False)
            break
        except OSError as e:
            # dlerror()'s text mostly starts with the name given.
            msg = str(e) if str(e).startswith(p) else f"{p}: {e}"
            errors.append(msg if os.sep in p else "the loader's path: " + msg)
    else:
        raise ImportError(_not_found(errors, explicit, missing))
    # Another library given by FENCELOCK_LIB (or found by the loader) loads too: refuse
    # it here, by name, rather than with an AttributeError at the first call.
    absent = [n for n in _CORE if getattr(lib, n, None) is None]
    if absent:
        raise ImportError(f"fencelock: {_loaded_path(lib, p)} is not libfencelock: it has no "
                          f"{absent[0]}(); point FENCELOCK_LIB at libfencelock.so.0")
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            continue  # an older library: has(name) is False
        fn.restype = restype
        fn.argtypes = argtypes
    check_version(lib, _loaded_path(lib, p))
    return lib


def _loaded_path(lib: Any, fallback: str) -> str:
    """The file the loader mapped for lib (from /proc/self/maps), else fallback."""
    fn = getattr(lib, "fl_strerror", None)
    if fn is None:
        return fallback
    addr = ctypes.cast(fn, c_void_p).value or 0
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= addr < hi and len(parts) == 6:
                    return parts[5].strip()
    except OSError:
        pass
    return fallback


def check_version(lib: Any, path: str) -> None:
    """ImportError unless lib's major version is VERSION_MAJOR.  A library without
    fl_version_number() predates it (0.0, major 0)."""
    fn = getattr(lib, "fl_version_number", None)
    if fn is None:
        number, text = 0, "older than 0.1 (no fl_version)"
    else:
        number = int(fn())
        text = lib.fl_version().decode("ascii", "replace")
    major = number >> 16
    if major != VERSION_MAJOR:
        raise ImportError(f"fencelock: the C library {path} is version {text} (major {major}); "
                          f"this Python binding needs major version {VERSION_MAJOR}: install "
                          f"the binding of the same release as the library, or point "
                          f"FENCELOCK_LIB at a {VERSION_MAJOR}.x library")


lib: Any = load()  # a ctypes.CDLL: its functions are typed by PROTOTYPES, not for mypy


def has(name: str) -> bool:
    """True if the loaded library exports the C function name."""
    return getattr(lib, name, None) is not None
