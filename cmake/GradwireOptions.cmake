# Compiler settings shared by every gradwire target.

add_library(gradwire_warnings INTERFACE)
target_compile_options(gradwire_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
  "$<$<COMPILE_LANGUAGE:CXX>:$<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>>"
  # nvcc takes host-compiler warnings through -Xcompiler.
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>")
if(GRADWIRE_WERROR)
  target_compile_options(gradwire_warnings INTERFACE
    "$<$<COMPILE_LANGUAGE:CXX>:-Werror>")
endif()

if(GRADWIRE_SANITIZE)
  # C and C++ only: nvcc does not take these flags.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()

# CUDA kernels (common/cuda): AUTO builds them when a CUDA toolkit is found.
# The CUDA language is enabled only then, so builds without a toolkit never
# look for nvcc.
set(GRADWIRE_HAVE_CUDA OFF)
if(NOT GRADWIRE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(GRADWIRE_HAVE_CUDA ON)
  elseif(GRADWIRE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GRADWIRE_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()
if(GRADWIRE_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  # Turing, Ampere and Hopper (H100/H200) machine code, plus Hopper PTX that
  # newer GPUs compile at load time. CUDA 13 no longer targets Volta (sm_70).
  # Each entry costs one device compile of common/cuda/kernels.cu.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;90" CACHE STRING
        "CUDA architectures of the gradwire kernels")
  endif()
  # The shared runtime (CUDA::cudart) for every target, not nvcc's static
  # default, so that a process holds one copy of it.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # The host compiler of nvcc is the C++ compiler of the rest of the build.
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
  endif()
  enable_language(CUDA)
endif()
if(GRADWIRE_HAVE_CUDA)
  message(STATUS "gradwire: CUDA kernels ON (${CMAKE_CUDA_COMPILER_ID} "
                 "${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "gradwire: CUDA kernels OFF")
endif()
