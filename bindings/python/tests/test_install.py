# SPDX-License-Identifier: MIT
"""`cmake --install` puts the package under the prefix, and the installed package finds
the installed library by itself (no FENCELOCK_LIB, no LD_LIBRARY_PATH)."""
import os
import subprocess
import sys

import pytest


def test_installed_package_finds_its_library(tmp_path):
    build = os.environ.get("FENCELOCK_BUILD_DIR")
    if not build:
        pytest.skip("FENCELOCK_BUILD_DIR not set (ctest sets it)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   capture_output=True)
    pkgs = list(prefix.glob("**/dist-packages/fencelock/__init__.py"))
    assert len(pkgs) == 1
    env = {k: v for k, v in os.environ.items()
           if k not in ("FENCELOCK_LIB", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(pkgs[0].parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", "import fencelock, fencelock._native as n;"
         "print(n.lib._name); print(fencelock.__file__); print(fencelock.strerror(116))"],
        env=env, cwd=tmp_path, check=True, capture_output=True, text=True).stdout.split("\n")
    assert out[0].startswith(str(prefix)) and out[0].endswith("libfencelock.so.0")
    assert out[1].startswith(str(prefix))
    assert "ownership" in out[2]
