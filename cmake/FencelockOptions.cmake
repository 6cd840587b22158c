# SPDX-License-Identifier: MIT
# Build options, and what each part of the build needs.
#
# The library needs only a C11 compiler, pkg-config and liburcu
# (liburcu-memb); the two programs libsmartcols too.  The rest is optional:
#   FL_BUILD_PROGRAMS  fencelockd and the fencelock tool, their manual pages,
#                      systemd units and bash completion (libsmartcols)
#   FL_BUILD_EXAMPLES  examples/ (SQLite; PostgreSQL's libpq when present)
#   FL_BUILD_TESTS     tests/ (cmocka; drives the examples, so needs them too)
#   FL_BUILD_BENCH     bench/ (SQLite when present, for one baseline)
#   FL_ETCD            the etcd backend, src/etcd/ (libcurl and jansson):
#                      FL_HAVE_ETCD says whether it is built
# They default ON in a source checkout and OFF when fencelock is a
# subproject (add_subdirectory, FetchContent): a project that embeds it gets
# the library (fencelock::fencelock), and installs it only if it asks
# (FL_INSTALL, as fmt's FMT_INSTALL).  An option that is ON but
# whose dependencies are missing is turned off with one STATUS line saying
# why; the configure step still succeeds.
#
# FL_WERROR (default OFF) turns warnings into errors.  Only the project's own
# test, lint, bench and CI scripts turn it on: a newer compiler with new
# warnings must not break a user's build.

if(DEFINED PROJECT_IS_TOP_LEVEL) # CMake 3.21
  set(FL_TOP_LEVEL ${PROJECT_IS_TOP_LEVEL})
elseif(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(FL_TOP_LEVEL ON)
else()
  set(FL_TOP_LEVEL OFF)
endif()
# CTest's BUILD_TESTING, when the builder set it, chooses the tests' default.
set(FL_TESTS_DEFAULT ${FL_TOP_LEVEL})
if(DEFINED BUILD_TESTING AND NOT BUILD_TESTING)
  set(FL_TESTS_DEFAULT OFF)
endif()

option(FL_BUILD_PROGRAMS "Build fencelockd and the fencelock tool (needs libsmartcols)" ${FL_TOP_LEVEL})
option(FL_BUILD_TESTS "Build the test suite (needs cmocka, the examples and the programs)" ${FL_TESTS_DEFAULT})
option(FL_BUILD_EXAMPLES "Build the examples (needs SQLite; libpq optional)" ${FL_TOP_LEVEL})
option(FL_BUILD_BENCH "Build the benchmarks" ${FL_TOP_LEVEL})
option(FL_ETCD "Build the etcd backend (needs libcurl and jansson)" ON)
option(FL_WERROR "Treat compiler warnings as errors (the project's own test and CI builds)" OFF)
option(FL_INSTALL "Generate the install rules (the library, programs, CMake package, .pc)" ${FL_TOP_LEVEL})
option(FL_ASAN "Build with AddressSanitizer" OFF)
option(FL_UBSAN "Build with UndefinedBehaviorSanitizer" OFF)
option(FL_TSAN "Build with ThreadSanitizer (in-process threaded paths only)" OFF)

# Warnings for fencelock's own targets only, never for an embedding project:
# fl_own_target(target...) links them the INTERFACE target fl_build (see the
# top CMakeLists.txt), which carries these, _GNU_SOURCE and the sanitizers.
set(FL_WARNING_FLAGS -Wall -Wextra)
if(FL_WERROR)
  list(APPEND FL_WARNING_FLAGS -Werror)
endif()
set(FL_SAN_FLAGS "")
if(FL_ASAN)
  list(APPEND FL_SAN_FLAGS -fsanitize=address -fno-omit-frame-pointer)
endif()
if(FL_UBSAN)
  list(APPEND FL_SAN_FLAGS -fsanitize=undefined -fno-sanitize-recover=all)
endif()
if(FL_TSAN)
  list(APPEND FL_SAN_FLAGS -fsanitize=thread)
endif()
# BUILD_INTERFACE: fl_build is the build's, never part of the installed
# package (the static library's PRIVATE links are exported otherwise).
function(fl_own_target)
  foreach(t ${ARGN})
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:fl_build>)
  endforeach()
endfunction()
# fl_internal_target(target...): for code that includes src/ (the library,
# the supervisor, the tests of internals): src/ on the include path.
function(fl_internal_target)
  foreach(t ${ARGN})
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:fl_build> $<BUILD_INTERFACE:fl_internal>)
  endforeach()
endfunction()

# ---- Optional parts: turn off, with one line, what cannot be built --------
if(FL_BUILD_EXAMPLES)
  if(NOT TARGET SQLite::SQLite3)
    find_package(SQLite3 QUIET)
  endif()
  if(NOT TARGET SQLite::SQLite3)
    message(STATUS "fencelock: SQLite3 not found (libsqlite3-dev): FL_BUILD_EXAMPLES is OFF")
    set(FL_BUILD_EXAMPLES OFF)
  endif()
endif()
if(FL_BUILD_TESTS)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND AND NOT TARGET PkgConfig::CMOCKA)
    pkg_check_modules(CMOCKA QUIET IMPORTED_TARGET cmocka)
  endif()
  if(NOT TARGET PkgConfig::CMOCKA)
    message(STATUS "fencelock: cmocka not found (libcmocka-dev): FL_BUILD_TESTS is OFF")
    set(FL_BUILD_TESTS OFF)
  elseif(NOT FL_BUILD_EXAMPLES)
    message(STATUS "fencelock: the tests drive the examples, which are not built: FL_BUILD_TESTS is OFF")
    set(FL_BUILD_TESTS OFF)
  endif()
endif()

# The etcd backend: the library serves etcd:// regions when both libcurl and
# jansson are found (Debian: libcurl4-openssl-dev, libjansson-dev); without
# them fl_open("etcd://...") says -EPROTONOSUPPORT and the rest builds.
set(FL_HAVE_ETCD OFF)
if(FL_ETCD)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND AND NOT TARGET PkgConfig::FL_CURL)
    # 7.77: TLS files handed to curl from memory (CURLOPT_CAINFO_BLOB)
    pkg_check_modules(FL_CURL QUIET IMPORTED_TARGET libcurl>=7.77.0)
    pkg_check_modules(FL_JANSSON QUIET IMPORTED_TARGET jansson)
  endif()
  if(TARGET PkgConfig::FL_CURL AND TARGET PkgConfig::FL_JANSSON)
    set(FL_HAVE_ETCD ON)
  else()
    message(STATUS "fencelock: libcurl (7.77 or later) or jansson not found (libcurl4-openssl-dev, libjansson-dev): the etcd backend is not built")
  endif()
endif()
