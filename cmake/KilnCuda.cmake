# kiln_cuda_executable(name SOURCES a.cpp ... [LIBRARIES lib ...])
#
# An executable whose C++ sources are built by the host compiler and run kiln on CUDA tensors.
# The sources are compiled with KILN_CUDA_KERNELS (kiln's CPU and CUDA backends); the CUDA
# kernels their objects launch are found among the objects' undefined symbols
# (cmake/kiln_cuda_kernels.py), written to <name>_kernels.cu and compiled by nvcc. nvcc thus
# sees only the kernels' name-free descriptors, never the expressions or their constexpr
# planning, which its front end is slow at (docs/cuda.md, "Builds").
#
# Also defines kiln::cuda: kiln, the CUDA runtime and cuBLASLt; translation units built by nvcc
# get --expt-relaxed-constexpr, which lets device code call kiln's constexpr helpers. Included
# by kiln's own build and by its package config (find_package(kiln)) where the CUDA Toolkit is.
find_package(CUDAToolkit REQUIRED)

# kiln's headers are C++20 in device code too. CMake 3.25 knows no C++20 flag for nvcc (newer
# CMake does): this names it, in the current scope, or with PARENT_SCOPE in the caller's.
macro(kiln_name_cuda20_flag)
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20" ${ARGN})
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20" ${ARGN})
  endif()
endmacro()
find_package(Python3 COMPONENTS Interpreter)
# kiln_cuda_executable may be called from any directory of the project (a parent that used
# add_subdirectory(kiln), where this file's variables are out of scope): what it needs is kept
# in global properties.
set_property(GLOBAL PROPERTY KILN_CUDA_KERNELS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/kiln_cuda_kernels.py)
if(Python3_Interpreter_FOUND)
  set_property(GLOBAL PROPERTY KILN_PYTHON3 ${Python3_EXECUTABLE})
endif()

if(NOT TARGET kiln::cuda)
  add_library(kiln_cuda INTERFACE)
  add_library(kiln::cuda ALIAS kiln_cuda)
  target_link_libraries(kiln_cuda INTERFACE kiln::kiln CUDA::cudart CUDA::cublasLt)
  target_compile_options(kiln_cuda INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -diag-suppress=20011,20012,20014 -Xcompiler=-fno-math-errno,-fno-trapping-math>)
endif()

function(kiln_cuda_executable name)
  cmake_parse_arguments(K "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "kiln_cuda_executable(${name}): enable CUDA first (enable_language(CUDA)); nvcc builds the generated kernels")
  endif()
  get_property(python GLOBAL PROPERTY KILN_PYTHON3)
  get_property(script GLOBAL PROPERTY KILN_CUDA_KERNELS_SCRIPT)
  if(NOT python)
    message(FATAL_ERROR "kiln_cuda_executable(${name}): needs python3 to list the kernels (cmake/kiln_cuda_kernels.py)")
  endif()
  add_library(${name}_host OBJECT ${K_SOURCES})
  target_link_libraries(${name}_host PUBLIC kiln::cuda ${K_LIBRARIES})
  target_compile_definitions(${name}_host PUBLIC KILN_CUDA_KERNELS=1)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${name}_kernels.cu)
  add_custom_command(OUTPUT ${gen}
    COMMAND ${python} ${script} --nm ${CMAKE_NM} -o ${gen} $<TARGET_OBJECTS:${name}_host>
    DEPENDS ${script} $<TARGET_OBJECTS:${name}_host>
    COMMENT "kiln: listing the CUDA kernels of ${name}"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_executable(${name} ${gen})
  target_link_libraries(${name} PRIVATE ${name}_host)
  # C++20 in device code whatever the calling project's default; the flag is named in the
  # caller's directory, where the target is generated.
  kiln_name_cuda20_flag(PARENT_SCOPE)
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  # Kernels built for sm_90a: the host code may offer kiln's wgmma GEMM kernel (tc_gemm.cuh).
  get_target_property(archs ${name} CUDA_ARCHITECTURES)
  if("90a" IN_LIST archs OR "90a-real" IN_LIST archs)
    target_compile_definitions(${name}_host PUBLIC KILN_CUDA_SM90A=1)
  endif()
endfunction()
