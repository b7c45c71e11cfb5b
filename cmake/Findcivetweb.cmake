# Finds civetweb (Debian: libcivetweb-dev) and defines civetweb::civetweb,
# the target name of civetweb's own CMake package.
#
# Debian 12's civetweb-config.cmake cannot be used: it imports the
# civetweb::server executable, which lives in another package (civetweb), and
# stops the configure with a fatal error when that file is missing. This
# module looks for the header and the library directly instead.
include(FindPackageHandleStandardArgs)
include(CMakeFindDependencyMacro)

find_path(civetweb_INCLUDE_DIR civetweb.h)
find_library(civetweb_LIBRARY civetweb)
find_package_handle_standard_args(civetweb
  REQUIRED_VARS civetweb_LIBRARY civetweb_INCLUDE_DIR)

if(civetweb_FOUND AND NOT TARGET civetweb::civetweb)
  find_dependency(Threads)
  add_library(civetweb::civetweb UNKNOWN IMPORTED)
  set_target_properties(civetweb::civetweb PROPERTIES
    IMPORTED_LOCATION "${civetweb_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${civetweb_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
endif()
mark_as_advanced(civetweb_INCLUDE_DIR civetweb_LIBRARY)
