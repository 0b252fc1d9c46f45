# kiln_cuda_executable(name SOURCES a.cpp ... [LIBRARIES lib ...])
#
# An executable whose C++ sources are built by the host compiler and run kiln on CUDA tensors.
# The sources are compiled with KILN_CUDA_KERNELS (kiln's CPU and CUDA backends); the CUDA
# kernels their objects launch are found among the objects' undefined symbols
# (cmake/kiln_cuda_kernels.py), written to <name>_kernels.cu and compiled by nvcc. nvcc thus
# sees only the kernels' name-free descriptors, never the expressions or their constexpr
# planning, which its front end is slow at (docs/cuda.md, "Builds").
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(KILN_CUDA_KERNELS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/kiln_cuda_kernels.py)

function(kiln_cuda_executable name)
  cmake_parse_arguments(K "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${name}_host OBJECT ${K_SOURCES})
  target_link_libraries(${name}_host PUBLIC kiln::cuda ${K_LIBRARIES})
  target_compile_definitions(${name}_host PUBLIC KILN_CUDA_KERNELS=1)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${name}_kernels.cu)
  add_custom_command(OUTPUT ${gen}
    COMMAND ${Python3_EXECUTABLE} ${KILN_CUDA_KERNELS_SCRIPT} --nm ${CMAKE_NM} -o ${gen} $<TARGET_OBJECTS:${name}_host>
    DEPENDS ${KILN_CUDA_KERNELS_SCRIPT} $<TARGET_OBJECTS:${name}_host>
    COMMENT "kiln: listing the CUDA kernels of ${name}"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_executable(${name} ${gen})
  target_link_libraries(${name} PRIVATE ${name}_host)
endfunction()
