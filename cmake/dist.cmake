# SPDX-License-Identifier: MIT
# What a distribution installs beside the programs and the library: systemd
# units (systemd/), manual pages (docs/man/) and bash completion
# (completions/), with their tests (tests/dist/).  Included once from the
# top-level CMakeLists.txt, after the targets and enable_testing().
#
# Every directory is a cache variable, relative to the install prefix unless
# absolute, so that packagers can point them elsewhere, for example
#   -DFL_SYSTEMD_SYSTEM_UNIT_DIR=$(pkg-config --variable=systemdsystemunitdir systemd)
#
# The units' defaults: under the prefix (systemd also reads
# /usr/local/lib/systemd/{system,user}), except for the prefix /usr, where
# systemd's own pkg-config file says where its units go, when it is found
# (Debian 12: /lib/systemd/system, where debhelper's dh_installsystemd looks
# for units to enable; Debian 13, Fedora, Arch: /usr/lib/systemd/system).
option(FL_INSTALL_SYSTEMD "Install the systemd units of fencelockd" ON)
set(fl_system_unit_dir "lib/systemd/system")
set(fl_user_unit_dir "lib/systemd/user")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  pkg_get_variable(fl_pc_system_unit_dir systemd systemdsystemunitdir)
  pkg_get_variable(fl_pc_user_unit_dir systemd systemduserunitdir)
  if(fl_pc_system_unit_dir)
    set(fl_system_unit_dir "${fl_pc_system_unit_dir}")
  endif()
  if(fl_pc_user_unit_dir)
    set(fl_user_unit_dir "${fl_pc_user_unit_dir}")
  endif()
endif()
set(FL_SYSTEMD_SYSTEM_UNIT_DIR "${fl_system_unit_dir}" CACHE STRING
  "Where the system unit fencelockd.service goes (relative to the prefix, or absolute)")
set(FL_SYSTEMD_USER_UNIT_DIR "${fl_user_unit_dir}" CACHE STRING
  "Where the user unit fencelockd.service goes (relative to the prefix, or absolute)")
set(FL_BASH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" CACHE STRING
  "Where the bash completion of fencelock goes (relative to the prefix, or absolute)")

# Installed with the rest (FL_INSTALL); the units and the completion are the
# programs' (FL_BUILD_PROGRAMS).
if(FL_INSTALL)
  if(FL_INSTALL_SYSTEMD AND FL_BUILD_PROGRAMS)
    add_subdirectory(${PROJECT_SOURCE_DIR}/systemd ${PROJECT_BINARY_DIR}/systemd)
  endif()
  add_subdirectory(${PROJECT_SOURCE_DIR}/docs/man ${PROJECT_BINARY_DIR}/docs/man)
  if(FL_BUILD_PROGRAMS)
    install(FILES ${PROJECT_SOURCE_DIR}/completions/fencelock.bash
      DESTINATION ${FL_BASH_COMPLETION_DIR} RENAME fencelock)
  endif()
endif()
if(FL_BUILD_TESTS)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/dist ${PROJECT_BINARY_DIR}/tests/dist)
endif()
