# Registers, shared memory and spills of every CUDA kernel (issue 24). The nvcc build prints a table
# with one row per kernel and architecture, keeps it in build/cuda-resources.md, and fails on a
# kernel that spills registers to local memory unless kernels/cuda/accepted-spills.txt accepts it.
# Beside it, build/cuda-tensor-cores.md counts the tensor-core instructions in each kernel's PTX.
# `linattn-bench gpu-plan` reads both (issue 26).
#
# ptxas reports the numbers when nvcc runs with --resource-usage, on stderr. A compiler launcher
# (cuda_resources.sh capture) keeps each .cu file's report in build/cuda-resources/, and once the
# .cu objects are built `cuda_resources.sh report` makes the table from the reports and checks the
# spills. Like the layer check, the report reruns only when a .cu object or the list has changed.
#
# Included by CMakeLists.txt inside if(LINATTN_CUDA), once linattn_kernels has its .cu sources
# (LINATTN_CUDA_SOURCES).

set(LINATTN_CUDA_RESOURCES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/cuda_resources.sh)
set(LINATTN_CUDA_RESOURCES_LOGS ${PROJECT_BINARY_DIR}/cuda-resources)
set(LINATTN_ACCEPTED_SPILLS ${PROJECT_SOURCE_DIR}/kernels/cuda/accepted-spills.txt)

target_compile_options(linattn_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--resource-usage>)
# A launcher already set (ccache, say) still runs, after ours.
set(launcher bash ${LINATTN_CUDA_RESOURCES_SCRIPT} capture ${LINATTN_CUDA_RESOURCES_LOGS})
get_target_property(other_launcher linattn_kernels CUDA_COMPILER_LAUNCHER)
if(other_launcher)
  list(APPEND launcher ${other_launcher})
endif()
set_target_properties(linattn_kernels PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")

# The launcher names each report after the object, which CMake names after the source's path.
set(cuda_resource_reports "")
foreach(source ${LINATTN_CUDA_SOURCES})
  file(RELATIVE_PATH source_path ${PROJECT_SOURCE_DIR} ${source})
  list(APPEND cuda_resource_reports ${LINATTN_CUDA_RESOURCES_LOGS}/${source_path}.log)
endforeach()

add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/cuda-resources.checked
  BYPRODUCTS ${PROJECT_BINARY_DIR}/cuda-resources.md ${PROJECT_BINARY_DIR}/cuda-tensor-cores.md
  COMMAND bash ${LINATTN_CUDA_RESOURCES_SCRIPT} report ${PROJECT_BINARY_DIR}/cuda-resources.md
          ${LINATTN_ACCEPTED_SPILLS} ${cuda_resource_reports}
  COMMAND bash ${LINATTN_CUDA_RESOURCES_SCRIPT} tensor-cores ${PROJECT_BINARY_DIR}/cuda-tensor-cores.md
          ${cuda_resource_reports}
  COMMAND ${CMAKE_COMMAND} -E touch ${PROJECT_BINARY_DIR}/cuda-resources.checked
  DEPENDS "$<FILTER:$<TARGET_OBJECTS:linattn_kernels>,INCLUDE,\\.cu\\.o$>"
          ${LINATTN_CUDA_RESOURCES_SCRIPT} ${LINATTN_ACCEPTED_SPILLS}
  COMMENT "Kernel registers, shared memory and spills (cmake/cuda_resources.cmake)"
  VERBATIM)
add_custom_target(linattn_cuda_resources ALL DEPENDS ${PROJECT_BINARY_DIR}/cuda-resources.checked)

# The spill check can fail. The fixture report spills on sm_80 and on sm_90: a list that accepts
# only the sm_80 spill, or the sm_90 one with fewer bytes than it spills, fails naming the kernel;
# a list that accepts both passes, and its table holds the numbers of the report.
set(fixture ${PROJECT_SOURCE_DIR}/tests/cuda_resources)
function(linattn_spill_check_test name accepted expected)
  # The run echoes its exit status, which a pass regex alone would not see.
  add_test(NAME cuda_resources.${name}
    COMMAND bash -c "bash \"$0\" report \"$1\" \"$2\" \"$3\"; echo \"report exited with $?\""
            ${LINATTN_CUDA_RESOURCES_SCRIPT} ${PROJECT_BINARY_DIR}/cuda-resources-${name}.md
            ${fixture}/${accepted} ${fixture}/attention.cu.log)
  set_tests_properties(cuda_resources.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expected}")
endfunction()
linattn_spill_check_test(unaccepted_spill_fails accepted-sm80.txt
  "does not accept the spills:\n  attention\\.cu  attention_backward_kernel<float,64>  sm_90: 96 bytes spill stores \\+ 128 bytes spill loads\nLower[^|]*report exited with 1")
linattn_spill_check_test(spill_above_accepted_bytes_fails accepted-too-few-bytes.txt
  "sm_90: 96 bytes spill stores \\+ 128 bytes spill loads, more than the 100 bytes that line 3 accepts\n[^|]*report exited with 1")
linattn_spill_check_test(accepted_spill_passes accepted-all.txt
  "attention_backward_kernel<float,64> \\| sm_80 \\| +255 \\| +0 \\| +8 \\| +20 \\| +16 \\| +444 \\| accepted \\(line 2\\) \\|\n\\| attention\\.cu +\\| attention_backward_kernel<float,64> \\| sm_90 \\| +255 \\| +0 \\| +96 \\| +128 \\| +96 \\| +- \\| accepted \\(line 2\\) \\|\n\\| attention\\.cu +\\| forward_kernel<float,64> +\\| sm_80 \\| +80 \\| +33792 \\| .*report exited with 0")

# The tensor-core count: of a PTX fixture's two entries, the one with a wmma.mma and a predicated
# mma.sync counts 2, the other 0, and the device function's mma.sync counts for neither; the table
# names them demangled.
add_test(NAME cuda_resources.tensor_core_count
  COMMAND bash ${LINATTN_CUDA_RESOURCES_SCRIPT} count-mma sm_90 ${fixture}/mma.ptx)
set_tests_properties(cuda_resources.tensor_core_count PROPERTIES PASS_REGULAR_EXPRESSION
  "^_ZN7linattn4cuda12_GLOBAL__N_19tc_kernelEPf\tsm_90\t2\n_ZN7linattn4cuda12_GLOBAL__N_112plain_kernelEPf\tsm_90\t0\n$")
add_test(NAME cuda_resources.tensor_core_table
  COMMAND bash -c "bash \"$0\" tensor-cores \"$1\" \"$2\" && cat \"$1\""
          ${LINATTN_CUDA_RESOURCES_SCRIPT} ${PROJECT_BINARY_DIR}/cuda-tensor-cores-fixture.md ${fixture}/mma.cu.log)
set_tests_properties(cuda_resources.tensor_core_table PROPERTIES PASS_REGULAR_EXPRESSION
  "\\| mma\\.cu \\| plain_kernel \\| sm_90 \\| 0 \\|\n\\| mma\\.cu \\| tc_kernel \\| sm_90 \\| 2 \\|")
