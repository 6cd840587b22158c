# SPDX-License-Identifier: MIT
"""The binding's version, which is the C library's: project(VERSION) of the top
CMakeLists.txt and FL_VERSION_* of fencelock.h.  pyproject.toml reads it (statically,
without importing the package) for the wheel's metadata; bindings/python/CMakeLists.txt
refuses to configure when it differs from project()."""
__version__ = "0.1.0"
