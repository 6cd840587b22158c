# SPDX-License-Identifier: MIT
"""`cmake --install` puts the package under the prefix, and the installed package finds
the installed library by itself (no FENCELOCK_LIB, no LD_LIBRARY_PATH).  When the package
finds no library, its ImportError names every place it tried and the two fixes."""
import os
import shutil
import subprocess
import sys

import pytest

PKG_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clean_env(**extra):
    """The environment without anything that tells Python or the loader where to look."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FENCELOCK_LIB", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME",
                        "VIRTUAL_ENV") and not k.startswith("PIP_")}
    env.update(extra)
    return env


def system_library():
    """True if the loader finds a libfencelock.so.0 by itself (one installed on this host).
    Asked in a child: this process has one loaded already, which dlopen would match."""
    return subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libfencelock.so.0')"],
                          env=clean_env(), capture_output=True).returncode == 0


def import_error(python, env, cwd):
    """The ImportError text of `import fencelock`, which must fail."""
    p = subprocess.run(
        [python, "-c", "import sys\ntry:\n import fencelock\nexcept ImportError as e:\n"
         " print(e)\n sys.exit(3)"],
        env=env, cwd=cwd, capture_output=True, text=True)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def test_installed_package_finds_its_library(tmp_path):
    build = os.environ.get("FENCELOCK_BUILD_DIR")
    if not build:
        pytest.skip("FENCELOCK_BUILD_DIR not set (ctest sets it)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   capture_output=True)
    pkgs = list(prefix.glob("**/dist-packages/fencelock/__init__.py"))
    assert len(pkgs) == 1
    # The type marker goes with the package (PEP 561), as in the wheel.
    assert (pkgs[0].parent / "py.typed").is_file()
    env = {k: v for k, v in os.environ.items()
           if k not in ("FENCELOCK_LIB", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(pkgs[0].parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", "import fencelock, fencelock._native as n, fencelock._version as v;"
         "print(n.lib._name); print(fencelock.__file__); print(fencelock.strerror(116));"
         "print(v.__version__ == fencelock.version())"],
        env=env, cwd=tmp_path, check=True, capture_output=True, text=True).stdout.split("\n")
    assert out[0].startswith(str(prefix)) and out[0].endswith("libfencelock.so.0")
    assert out[1].startswith(str(prefix))
    assert "ownership" in out[2]
    assert out[3] == "True"


def test_missing_fencelock_lib_says_how(tmp_path):
    # An explicit FENCELOCK_LIB is the only place tried, even if another library exists.
    missing = tmp_path / "nowhere" / "libfencelock.so.0"
    msg = import_error(sys.executable, clean_env(FENCELOCK_LIB=str(missing), PYTHONPATH=PKG_SRC),
                       tmp_path)
    assert f"FENCELOCK_LIB={missing}" in msg
    assert "No such file" in msg
    assert "set FENCELOCK_LIB=/path/libfencelock.so.0" in msg and "unset it" in msg
    assert "beside the package" in msg  # what unsetting it would do


def test_no_library_anywhere_says_what_was_tried(tmp_path):
    if system_library():
        pytest.skip("a libfencelock.so.0 is installed on this host: the loader finds it")
    site = tmp_path / "site"
    shutil.copytree(os.path.join(PKG_SRC, "fencelock"), site / "fencelock",
                    ignore=shutil.ignore_patterns("__pycache__", "_install_paths.py"))
    env = clean_env(PYTHONPATH=str(site))
    msg = import_error(sys.executable, env, tmp_path)
    lines = msg.splitlines()
    assert lines[0] == "fencelock: cannot find the C library libfencelock.so.0; tried:"
    beside = [ln for ln in lines if "beside the package" in ln]
    assert len(beside) == 1
    for d in (site, site / "lib", tmp_path / "lib", tmp_path / "lib64"):
        assert f" {d}," in beside[0] or beside[0].endswith(f" {d}")
    assert any(ln.strip().startswith("the loader's path: libfencelock.so.0") for ln in lines)
    assert "Install libfencelock" in lines[-1]
    assert "FENCELOCK_LIB=/path/libfencelock.so.0" in lines[-1]

    # Both fixes it names work: FENCELOCK_LIB, and a library beside the package.
    lib = os.path.realpath(os.environ["FENCELOCK_LIB"])
    show = [sys.executable, "-c", "import fencelock._native as n; print(n.lib._name)"]
    out = subprocess.run(show, env=dict(env, FENCELOCK_LIB=lib), cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == lib
    (tmp_path / "lib").mkdir()
    shutil.copy(lib, tmp_path / "lib" / "libfencelock.so.0")
    out = subprocess.run(show, env=env, cwd=tmp_path, check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == str(tmp_path / "lib" / "libfencelock.so.0")
