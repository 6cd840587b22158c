# SPDX-License-Identifier: MIT
"""Dataclasses for the inspection API (fl_*_info_get), built from the ctypes structs.

Each dataclass has the fields of its C struct, under the same names; char
arrays become str, durations stay in the C units the field names say (_ns).
"""
import dataclasses
import os

from ._native import FlClientInfo, FlLockInfo, FlRecordInfo, FlRegionInfo, FlUnregisteredInfo


def _from_c(cls, c):
    values = {}
    for f in dataclasses.fields(cls):
        v = getattr(c, f.name)
        if isinstance(v, bytes):  # a char array: NUL-terminated text
            v = os.fsdecode(v)
        values[f.name] = v
    return cls(**values)


def _dataclass_of(name, struct, doc):
    """A frozen dataclass with struct's fields (str for char arrays, int otherwise)."""
    fields = []
    for fname, ftype in struct._fields_:
        if fname.startswith("reserved"):  # room to grow (docs/abi.md), not a field
            continue
        is_text = hasattr(ftype, "_length_")  # char[N]: the only arrays in these structs
        fields.append((fname, str if is_text else int))
    cls = dataclasses.make_dataclass(name, fields, frozen=True,
                                     namespace={"from_c": classmethod(_from_c), "__doc__": doc})
    cls.__module__ = "fencelock"
    return cls


RegionInfo = _dataclass_of("RegionInfo", FlRegionInfo, "fl_region_info: the region's header.")
LockInfo = _dataclass_of("LockInfo", FlLockInfo, "fl_lock_info: one lock slot (key).")
RecordInfo = _dataclass_of("RecordInfo", FlRecordInfo, "fl_record_info: one fenced record.")
ClientInfo = _dataclass_of("ClientInfo", FlClientInfo, "fl_client_info: one registered client.")
UnregisteredInfo = _dataclass_of(
    "UnregisteredInfo", FlUnregisteredInfo,
    "fl_unregistered_info: a process that opened the region unregistered (no death detection)."
    "  reason is a negative errno (-ECONNREFUSED, -ENOENT: no supervisor listening; -EACCES:"
    " its socket refused the process); fencelock.err_name(reason) names it.")
