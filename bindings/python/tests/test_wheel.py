# SPDX-License-Identifier: MIT
"""The package as pip users get it (bindings/python/pyproject.toml), the ctest test
python_wheel: a wheel built from a copy of bindings/python with no network (no build
isolation, no index), installed into a fresh venv with no index, shown by `pip show` with
the library's version, used against a real fencelockd, uninstalled.  The wheel is pure
Python (py3-none-any) and carries py.typed; the library is the system's (here: the build's,
through FENCELOCK_LIB)."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import TOP
from test_install import PKG_SRC, clean_env, import_error, system_library


def project_version():
    """project(fencelock VERSION x.y.z) of the top CMakeLists.txt: the library's version."""
    with open(os.path.join(TOP, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"^project\(fencelock VERSION (\S+)", f.read(), re.M).group(1)


def offline():
    """A command prefix that runs with no network (a network namespace of its own), where
    this host allows one; --no-index and --no-build-isolation keep pip offline anyway."""
    if shutil.which("unshare"):
        for prefix in (["unshare", "--net"], ["unshare", "--map-root-user", "--net"]):
            if subprocess.run(prefix + ["true"], capture_output=True).returncode == 0:
                return prefix
    return []


def pip_env():
    # No pip configuration of the user's or the host's (no index, no find-links).
    return clean_env(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
                     PIP_NO_INPUT="1")


def run(cmd, **kw):
    p = subprocess.run(cmd, env=kw.pop("env", pip_env()), capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{cmd} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def tree(top):
    """Every path under top, to see that building left the source tree as it was."""
    return sorted(os.path.relpath(os.path.join(d, n), top)
                  for d, dirs, files in os.walk(top) for n in dirs + files)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built as the README says but from a copy: setuptools writes build/ and
    fencelock.egg-info/ into the tree it builds."""
    work = tmp_path_factory.mktemp("wheel")
    before = tree(PKG_SRC)
    src = work / "python"
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", "tests", "_install_paths.py"))
    run(offline() + [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                     "--no-index", "-w", str(work / "dist"), str(src)])
    assert tree(PKG_SRC) == before
    wheels = list((work / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_is_pure_python_with_the_librarys_version(wheel):
    v = project_version()
    assert wheel.name == f"fencelock-{v}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(f"fencelock-{v}.dist-info/METADATA").decode()
        tags = z.read(f"fencelock-{v}.dist-info/WHEEL").decode()
    assert "fencelock/py.typed" in names
    assert "fencelock/__init__.py" in names and "fencelock/_native.py" in names
    # Only the package: no library inside (the system's is used), no tests, no
    # cmake --install paths.
    assert [n for n in names if not n.startswith(("fencelock/", f"fencelock-{v}.dist-info/"))] == []
    assert [n for n in names if ".so" in n or "_install_paths" in n or "test" in n] == []
    assert f"\nVersion: {v}\n" in meta and "\nRequires-Python: >=3.11\n" in meta
    assert "Root-Is-Purelib: true" in tags and "Tag: py3-none-any" in tags


def test_install_use_uninstall_in_a_fresh_venv(wheel, daemon, region, tmp_path):
    v = project_version()
    venv = tmp_path / "venv"
    run(offline() + [sys.executable, "-m", "venv", str(venv)])
    pip, python = str(venv / "bin" / "pip"), str(venv / "bin" / "python")
    run(offline() + [pip, "install", "--no-index", str(wheel)], cwd=tmp_path)

    show = run([pip, "show", "fencelock"], cwd=tmp_path)
    fields = dict(ln.split(": ", 1) for ln in show.splitlines() if ": " in ln)
    assert fields["Name"] == "fencelock" and fields["Version"] == v
    site = fields["Location"]
    assert site.startswith(str(venv))
    assert os.path.isfile(os.path.join(site, "fencelock", "py.typed"))

    # The wheel's package with no library anywhere says where it looked and how to fix it.
    if not system_library():
        msg = import_error(python, pip_env(), tmp_path)
        assert f" {site}," in msg and "the loader's path" in msg
        assert "FENCELOCK_LIB=/path/libfencelock.so.0" in msg and "Install libfencelock" in msg

    # With the library (the build's): the venv's package, against a real fencelockd.
    script = """if 1:
        import json, sys, fencelock
        with fencelock.open(sys.argv[1]) as r:
            with r.acquire("wheel/job", lease=30.0, timeout=30.0) as lease:
                accepted = r.commit(lease, "wheel/job/state", b"from the wheel")
                data, fence = r.read("wheel/job/state")
                token = lease.token
        print(json.dumps({"file": fencelock.__file__, "version": fencelock.version(),
                          "token": token, "accepted": accepted, "data": data.decode(),
                          "fence": fence}))
    """
    env = dict(pip_env(), FENCELOCK_LIB=os.environ["FENCELOCK_LIB"])
    out = json.loads(run([python, "-c", script, daemon.region], env=env, cwd=tmp_path))
    assert out["file"] == os.path.join(site, "fencelock", "__init__.py")
    assert out["version"] == v
    assert out["accepted"] == out["token"] == out["fence"] > 0
    assert out["data"] == "from the wheel"
    # The record is the region's, as another process (this one) reads it.
    assert region.read("wheel/job/state") == (b"from the wheel", out["token"])

    run([pip, "uninstall", "-y", "fencelock"], cwd=tmp_path)
    assert not os.path.exists(os.path.join(site, "fencelock"))
    p = subprocess.run([pip, "show", "fencelock"], env=pip_env(), cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode != 0
    p = subprocess.run([python, "-c", "import fencelock"], env=env, cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode != 0 and "No module named 'fencelock'" in p.stderr
