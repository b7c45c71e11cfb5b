# `cmake --install` and the CMake package: the client and worker libraries
# with their headers, found by other projects with find_package(gradwire)
# as gradwire::client and gradwire::worker, and the programs.
#
# Components (cmake --install <build> --component <name>):
#   development  static libraries, headers, the CMake package files
#   libraries    shared libraries (a build with BUILD_SHARED_LIBS=ON only)
#   programs     gradwire, gradwire-server, gradwire-worker
#
# Included from the top-level CMakeLists.txt after every folder is added.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GRADWIRE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/gradwire"
    CACHE STRING "Where gradwireConfig.cmake is installed, under the prefix")

# The project's libraries that `target` needs at link time, itself
# included: its link libraries, private ones too (a static library's
# private dependencies are linked by whoever links it), followed to the end.
# Imported targets (Abseil, gRPC, torch) belong to other packages.
function(gradwire_link_closure target out)
  set(closure ${${out}})
  set(pending ${target})
  while(pending)
    list(POP_FRONT pending current)
    if(current IN_LIST closure)
      continue()
    endif()
    list(APPEND closure ${current})
    get_target_property(type ${current} TYPE)
    set(links)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${current} LINK_LIBRARIES)
    endif()
    get_target_property(interface_links ${current} INTERFACE_LINK_LIBRARIES)
    foreach(link IN LISTS links interface_links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      if(TARGET "${link}" AND link MATCHES "^gradwire_")
        get_target_property(imported ${link} IMPORTED)
        if(NOT imported)
          list(APPEND pending ${link})
        endif()
      endif()
    endforeach()
  endwhile()
  set(${out} ${closure} PARENT_SCOPE)
endfunction()

set(gradwire_exported_libraries)
gradwire_link_closure(gradwire_client gradwire_exported_libraries)
if(TARGET gradwire_worker)
  gradwire_link_closure(gradwire_worker gradwire_exported_libraries)
endif()

foreach(library ${gradwire_exported_libraries})
  # gradwire_client -> gradwire::client, gradwire_proto -> gradwire::proto.
  string(REGEX REPLACE "^gradwire_" "" export_name ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${export_name})
  # Each folder puts the source tree (or the generated code) on its
  # library's include path; that path holds for the build only. Installed,
  # the headers are found under the include directory (INCLUDES below).
  get_target_property(include_dirs ${library} INTERFACE_INCLUDE_DIRECTORIES)
  if(include_dirs)
    set(build_include_dirs)
    foreach(dir IN LISTS include_dirs)
      if(dir MATCHES "^\\$<")
        list(APPEND build_include_dirs "${dir}")
      else()
        list(APPEND build_include_dirs "$<BUILD_INTERFACE:${dir}>")
      endif()
    endforeach()
    set_target_properties(${library} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${build_include_dirs}")
  endif()
endforeach()

# The same names inside this build, for projects that add gradwire with
# add_subdirectory() or FetchContent.
add_library(gradwire::client ALIAS gradwire_client)
if(TARGET gradwire_worker)
  add_library(gradwire::worker ALIAS gradwire_worker)
endif()

# Installed headers keep their paths under include/gradwire/ (the
# "worker/...", "client/..." and "common/..." lines between them resolve
# with that folder on the include path), and the public headers
# (include/gradwire/*.h) and the generated ones ("gradwire/v1/...") are
# found from include/. Each folder installs its own headers.
install(TARGETS ${gradwire_exported_libraries}
  EXPORT gradwireTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libraries
          NAMELINK_COMPONENT development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT libraries
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
                       ${CMAKE_INSTALL_INCLUDEDIR}/gradwire)
install(FILES ${PROJECT_SOURCE_DIR}/include/gradwire/client.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gradwire COMPONENT development)
if(TARGET gradwire_worker)
  install(FILES ${PROJECT_SOURCE_DIR}/include/gradwire/worker.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gradwire COMPONENT development)
endif()

install(EXPORT gradwireTargets
  NAMESPACE gradwire::
  DESTINATION ${GRADWIRE_INSTALL_CMAKEDIR}
  COMPONENT development)
# What gradwireConfig.cmake.in reads.
set(GRADWIRE_PACKAGE_HAS_WORKER OFF)
if(TARGET gradwire_worker)
  set(GRADWIRE_PACKAGE_HAS_WORKER ON)
endif()
# The CUDA kernels link the CUDA runtime (common/cuda), when they are built
# and exported (the worker links them).
set(GRADWIRE_PACKAGE_NEEDS_CUDA OFF)
if(GRADWIRE_HAVE_CUDA AND gradwire_cuda IN_LIST gradwire_exported_libraries)
  set(GRADWIRE_PACKAGE_NEEDS_CUDA ON)
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/gradwireConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gradwireConfig.cmake
  INSTALL_DESTINATION ${GRADWIRE_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/gradwireConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/gradwireConfig.cmake
  ${PROJECT_BINARY_DIR}/gradwireConfigVersion.cmake
  DESTINATION ${GRADWIRE_INSTALL_CMAKEDIR}
  COMPONENT development)

# The programs, those this build has (GRADWIRE_BUILD_PROGRAMS and
# GRADWIRE_BUILD_WORKER decide).
set(gradwire_programs)
foreach(program gradwire gradwire-server gradwire-worker)
  if(TARGET ${program})
    list(APPEND gradwire_programs ${program})
  endif()
endforeach()
if(gradwire_programs)
  if(BUILD_SHARED_LIBS)
    set_target_properties(${gradwire_programs} PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
  install(TARGETS ${gradwire_programs}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT programs)
endif()
