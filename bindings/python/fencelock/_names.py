# SPDX-License-Identifier: MIT
"""Keys, record names and region paths, between Python and C.

The C library takes NUL-terminated byte strings; ctypes would cut a str or
bytes at its first NUL without a word ("job\\0A" would lock "job"), so a NUL
is refused here.  str is encoded as UTF-8 with surrogateescape, and the names
the library returns are decoded the same way: os.fsencode/os.fsdecode's rule
on Linux, whatever the locale, so every name locks() returns (even one that
is not UTF-8, 'raw\\udcff') can be passed back to acquire().
"""
from __future__ import annotations

import os
from typing import Dict, Union

Name = Union[str, bytes, bytearray]
"""A key or record name: str, or the bytes the C library sees."""

_CACHE_MAX = 1024
_cache: Dict[str, bytes] = {}  # str -> its checked bytes: the hot path's names repeat


def encode_name(s: object, what: str) -> bytes:
    """s as the C library takes it: ValueError for a NUL, TypeError for a non-name."""
    if type(s) is str:  # noqa: E721 - exact type: a str subclass may redefine __hash__
        b = _cache.get(s)
        if b is not None:
            return b
        b = s.encode("utf-8", "surrogateescape")
        if b"\0" in b:
            raise ValueError(f"{what} {s!r} contains a NUL character: the C library's names "
                             "end at the first NUL")
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[s] = b
        return b
    if isinstance(s, str):
        return encode_name(str.__str__(s), what)  # its text, not an overridden __str__
    if isinstance(s, (bytes, bytearray)):
        b = bytes(s)
        if b"\0" in b:
            raise ValueError(f"{what} {b!r} contains a NUL byte: the C library's names end at "
                             "the first NUL")
        return b
    raise TypeError(f"{what} must be str or bytes, not {type(s).__name__}")


def decode_name(b: bytes) -> str:
    """A name the C library returned, as encode_name() would give it back."""
    return b.decode("utf-8", "surrogateescape")


def encode_path(p: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
                what: str = "region") -> bytes:
    """A region path or URI (os.fsencode), refusing a NUL."""
    b = os.fsencode(p)
    if b"\0" in b:
        raise ValueError(f"{what} {p!r} contains a NUL byte: a path ends at the first NUL")
    return b
