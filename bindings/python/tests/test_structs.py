# SPDX-License-Identifier: MIT
"""The ctypes structs mirror fencelock.h exactly: every field's offset and every struct's
size, compared with what a C compiler says about the header."""
import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import TOP
from fencelock import _native


def test_struct_layout_matches_the_header(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    include = os.environ.get("FENCELOCK_INCLUDE", os.path.join(TOP, "include"))
    lines, expected = [], []
    for cname, cls in _native.STRUCTS.items():
        lines.append(f'printf("%zu\\n", sizeof({cname}));')
        expected.append(f"{cname} {ctypes.sizeof(cls)}")
        for fname, _ in cls._fields_:
            lines.append(f'printf("%zu\\n", offsetof({cname}, {fname}));')
            expected.append(f"{cname}.{fname} {getattr(cls, fname).offset}")
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <fencelock.h>\n"
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", include, str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    got = [f"{e.split()[0]} {v}" for e, v in zip(expected, got)]
    # A field missing or mistyped in ctypes moves the offsets after it, or the size.
    assert got == expected


def test_every_prototype_is_exported():
    missing = [n for n in _native.PROTOTYPES if not _native.has(n)]
    assert missing == []
