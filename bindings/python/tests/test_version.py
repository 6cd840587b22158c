# SPDX-License-Identifier: MIT
"""The library's version, the import-time check of its major version, and that the binding
wraps every public C function of fencelock.h."""
import os
import re

import pytest

import fencelock
from conftest import TOP
from fencelock import _native


def header():
    include = os.environ.get("FENCELOCK_INCLUDE", os.path.join(TOP, "include"))
    with open(os.path.join(include, "fencelock.h"), encoding="utf-8") as f:
        return f.read()


def test_version():
    h = header()
    want = tuple(int(re.search(rf"#define FL_VERSION_{p} (\d+)", h).group(1))
                 for p in ("MAJOR", "MINOR", "PATCH"))
    assert fencelock.version() == "%d.%d.%d" % want
    assert fencelock.version_number() == want[0] << 16 | want[1] << 8 | want[2]
    assert _native.VERSION_MAJOR == want[0]


class FakeLib:
    def __init__(self, number, text):
        self.fl_version_number = lambda: number
        self.fl_version = lambda: text


def test_another_major_version_is_an_import_error():
    _native.check_version(FakeLib(0x000203, b"0.2.3"), "/x/libfencelock.so.0")  # newer minor
    with pytest.raises(ImportError) as e:
        _native.check_version(FakeLib(0x010000, b"1.0.0"), "/x/libfencelock.so.1")
    msg = str(e.value)
    assert "1.0.0" in msg and "/x/libfencelock.so.1" in msg
    assert f"major version {_native.VERSION_MAJOR}" in msg


def test_every_public_function_is_wrapped():
    public = re.findall(r"^FL_API [^(]*?\b(fl_\w+)\(", header(), re.M)
    assert len(public) > 30
    assert [n for n in public if n not in _native.PROTOTYPES] == []
    assert [n for n in _native.PROTOTYPES if n not in public] == []
    assert f"#define FL_UNREGISTERED_MAX {_native.UNREGISTERED_MAX}u" in header()
    assert f"#define FL_BOOT_ID_SIZE {_native.BOOT_ID_SIZE}\n" in header()
