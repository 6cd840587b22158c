# SPDX-License-Identifier: MIT
# Cross build for aarch64 (arm64) Linux on a Debian 12 x86-64 host, tests run
# under qemu-user:
#
#   cmake -S . -B build-arm64 --toolchain cmake/aarch64-linux-gnu.cmake
#   cmake --build build-arm64 -j2
#   cd build-arm64 && ctest -R '^(lock_.*|death|death_life|fault_pause|supervisor_restart|rec_.*)$'
#
# or all of it, with the packages and qemu's binfmt handler: tools/test-arm64.
#
# What it needs (tools/bootstrap installs it):
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross     the compiler and its libc
#   qemu-user-static                                 runs the test binaries
#   the arm64 libraries, from Debian's multiarch (dpkg --add-architecture
#   arm64): liburcu-dev:arm64 (the library), libsmartcols-dev:arm64 (the
#   tool), libsqlite3-dev:arm64 (the examples the tests drive) and
#   libcmocka-dev:arm64 (the tests).  Without them the library is still
#   built if liburcu is found some other way, and the tests are turned off
#   (cmake/FencelockOptions.cmake says so).
#
# The emulator: with the multiarch arm64 libraries installed, libc6:arm64 is
# too, and /lib/ld-linux-aarch64.so.1 with it: qemu then runs the binaries
# without a prefix, and must not get `-L /usr/aarch64-linux-gnu`: that
# prefix would give them the cross package's ld.so (2.36-8cross1), which
# then loads the multiarch libc.so.6 (2.36-9+deb12u*) through
# /etc/ld.so.cache; the mismatched pair hangs every forked child.  Only
# without multiarch (no /lib/ld-linux-aarch64.so.1) is the prefix used.
# Programs the tests exec (fencelockd, the fencelock tool) are started by
# the kernel through binfmt_misc's qemu-aarch64 handler, which
# tools/test-arm64 registers when it is missing.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Libraries and headers of the target only; programs (python3, sh) of the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config: the arm64 .pc files of multiarch, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
unset(ENV{PKG_CONFIG_PATH})

find_program(FL_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(FL_QEMU_AARCH64)
  if(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${FL_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${FL_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
  endif()
endif()
