# Compiler settings shared by every gradwire target.

add_library(gradwire_warnings INTERFACE)
target_compile_options(gradwire_warnings INTERFACE
  -Wall -Wextra -Wno-unused-parameter
  $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>)

if(GRADWIRE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# CUDA kernels: AUTO builds them when a CUDA toolkit is found.
set(GRADWIRE_HAVE_CUDA OFF)
if(NOT GRADWIRE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(GRADWIRE_HAVE_CUDA ON)
  elseif(GRADWIRE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GRADWIRE_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()
message(STATUS "gradwire: CUDA kernels ${GRADWIRE_HAVE_CUDA}")
