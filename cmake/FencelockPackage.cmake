# SPDX-License-Identifier: MIT
# Installing fencelock as a library others build against:
#   <prefix>/lib/libfencelock.so.0 (+ .a), include/fencelock.h,
#   bin/fencelockd, bin/fencelock,
#   lib/cmake/fencelock/  find_package(fencelock CONFIG): fencelock::fencelock
#                         (shared) and fencelock::fencelock_static,
#   lib/pkgconfig/fencelock.pc, share/doc/fencelock/LICENSE.
# The installed `fencelock` finds libfencelock.so.0 through a RUNPATH relative
# to its own place ($ORIGIN/../lib), so any prefix works without
# LD_LIBRARY_PATH or ldconfig, unless the library goes to a directory the
# loader searches anyway (FL_LIBDIR_IS_SYSTEM: the prefix /usr), where it needs
# none; `fencelockd` links the static library.
# docs/abi.md says what stays stable.

set(FL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fencelock)

# $ORIGIN-relative RUNPATH from bin/ to lib/ (also right for an absolute
# CMAKE_INSTALL_LIBDIR).  None when the library is in a system directory
# (top CMakeLists.txt, FL_LIBDIR_IS_SYSTEM): the loader finds it there.
if(NOT FL_LIBDIR_IS_SYSTEM AND FL_BUILD_PROGRAMS)
  file(RELATIVE_PATH FL_BIN_TO_LIB
    ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(fencelock_tool PROPERTIES INSTALL_RPATH "$ORIGIN/${FL_BIN_TO_LIB}")
endif()

install(TARGETS fencelock fencelock_static EXPORT fencelock-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(FL_BUILD_PROGRAMS)
  install(TARGETS fencelockd fencelock_tool
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT fencelock-targets
  NAMESPACE fencelock::
  FILE fencelock-targets.cmake
  DESTINATION ${FL_CMAKE_DIR})
include(CMakePackageConfigHelpers)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fencelock-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/fencelock-config.cmake
  INSTALL_DESTINATION ${FL_CMAKE_DIR})
# docs/abi.md: a minor version only adds (also before 1.0); any break is a
# new major version, with a new SONAME.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/fencelock-config-version.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/fencelock-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/fencelock-config-version.cmake
  DESTINATION ${FL_CMAKE_DIR})

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

# A relocatable .pc: the prefix is found from the file's own place, so
# `cmake --install --prefix ANY` works without reconfiguring.  Not when the
# library goes to a system directory (FL_LIBDIR_IS_SYSTEM, the prefix /usr):
# there the .pc names the prefix itself, so that pkg-config recognises
# -I/usr/include and -L/usr/lib/<multiarch> as the system's and leaves them
# out; spelt through ${pcfiledir}/../../.. they would go on every link line,
# ahead of the -L of any module listed after fencelock, whose libraries the
# system's of the same name would then shadow.
if(FL_LIBDIR_IS_SYSTEM)
  set(FL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH FL_PC_TO_PREFIX
    "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  set(FL_PC_PREFIX "\${pcfiledir}/${FL_PC_TO_PREFIX}")
endif()
if(FL_HAVE_ETCD)
  set(FL_PC_ETCD_REQUIRES ", jansson")
  set(FL_PC_ETCD_LIBS " -lcurl")
else()
  set(FL_PC_ETCD_REQUIRES "")
  set(FL_PC_ETCD_LIBS "")
endif()
configure_file(${PROJECT_SOURCE_DIR}/fencelock.pc.in fencelock.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/fencelock.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
