# The layer rule: a folder includes headers only from itself and from the folders below it.
#
#     sweep -> train ----> layers -> autograd -> kernels -> core
#                \-------> data ---------------------------^
#
# Run as `cmake -DROOT=DIR -P check_layers.cmake`: scans every `#include "FOLDER/..."` in DIR's
# layer folders and fails, naming the file, the line and the rule, on an include of a higher or
# unrelated folder (or one that climbs with "..").
# The build runs it before compiling (CMakeLists.txt); tests/layering checks that it can fail.
cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P check_layers.cmake")
endif()

# What each folder may include, itself first.
set(allowed_core     core)
set(allowed_kernels  kernels core)
set(allowed_autograd autograd kernels core)
set(allowed_layers   layers autograd kernels core)
set(allowed_data     data core)
set(allowed_train    train layers autograd kernels data core)
set(allowed_sweep    sweep train layers autograd kernels data core)
set(layer_folders core kernels autograd layers data train sweep)

set(violations "")
foreach(folder ${layer_folders})
  file(GLOB_RECURSE files "${ROOT}/${folder}/*.h" "${ROOT}/${folder}/*.cpp" "${ROOT}/${folder}/*.cu"
       "${ROOT}/${folder}/*.cuh")
  foreach(path ${files})
    file(STRINGS "${path}" lines)
    file(RELATIVE_PATH rel "${ROOT}" "${path}")
    set(line_no 0)
    foreach(line IN LISTS lines)
      math(EXPR line_no "${line_no} + 1")
      # The ops reach CUDA through the backend table (kernels/backend.h) only.
      if(folder MATCHES "^(autograd|layers)$" AND line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](kernels/cuda/|core/cuda/check|cuda|cublas|nccl)")
        string(APPEND violations "  ${rel}:${line_no}: ${folder}/ includes a CUDA header; call the backend table (kernels/backend.h) instead\n")
      endif()
      # Above kernels/, the columns are reached through the table and named with the neutral
      # vocabulary (kernels/backend.h, kernels/op_types.h), never by a column's own header.
      if(folder MATCHES "^(autograd|layers|train|data|sweep)$" AND line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"kernels/cpu/")
        string(APPEND violations "  ${rel}:${line_no}: ${folder}/ includes a CPU kernel header; call the backend table (kernels/backend.h) and name ops with kernels/op_types.h instead\n")
      endif()
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\"")
        set(target "${CMAKE_MATCH_1}")
        string(FIND "${target}" "/" slash)
        if(target MATCHES "\\.\\.")
          string(APPEND violations "  ${rel}:${line_no}: #include \"${target}\": include by the path from the project root, not with \"..\"\n")
        elseif(slash GREATER 0)
          string(SUBSTRING "${target}" 0 ${slash} top)
          list(FIND layer_folders "${top}" is_layer)
          list(FIND allowed_${folder} "${top}" ok)
          if(is_layer GREATER_EQUAL 0 AND ok LESS 0)
            string(REPLACE ";" ", " may "${allowed_${folder}}")
            string(APPEND violations "  ${rel}:${line_no}: #include \"${target}\": ${folder}/ may include only ${may} (layers include downward; README.md, \"Layout\")\n")
          endif()
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "upward include across the layers:\n${violations}")
endif()
