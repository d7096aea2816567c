# The conformance cases' CUDA for hopper through nvcc and ptxas for sm_90a, in one translation unit
# (one nvcc run keeps it fast): each case emitted by the generator main (-e cuda), then all of
# them assembled; an error, a wgmma ptxas serializes or an ignored setmaxnreg fails.
#   cmake -DGEN=conformance_gen -DCASES="name|generator|params;..." -DOUT=dir -DRUNTIME=dir -P check_ptxas.cmake
cmake_policy(SET CMP0007 NEW) # keep the empty parameters of a case
if(DEFINED ENV{TANDEM_NVCC})
  set(nvcc $ENV{TANDEM_NVCC})
elseif(EXISTS /usr/local/cuda/bin/nvcc)
  set(nvcc /usr/local/cuda/bin/nvcc)
else()
  find_program(nvcc nvcc)
endif()
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(unit "")
foreach(case ${CASES})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 generator)
  list(GET parts 2 params)
  separate_arguments(params UNIX_COMMAND "${params}")
  execute_process(COMMAND ${GEN} -g ${generator} -o ${OUT} -f conformance_${name} -e cuda target=hopper ${params}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: the hopper CUDA was not emitted: ${err}")
  endif()
  string(APPEND unit "#include \"conformance_${name}.cu\"\n")
endforeach()
file(WRITE ${OUT}/all.cu "${unit}")
# The zero padding of an MMA operand made on chip goes to each fragment register's own row and
# column: a constant there (Halide drops the loop of a one-row or one-column tile) has every
# thread write one element, a race only the GPU shows (session 45: the `_ones` cases read zeros).
file(GLOB emitted ${OUT}/conformance_*.cu)
foreach(f ${emitted})
  file(STRINGS ${f} shared REGEX "swizzled_128B<[^>]*>\\(([0-9]+,|[^,]*, [0-9]+\\))[^;]*_rn\\(0\\.0f\\);")
  if(shared)
    message(FATAL_ERROR "${f}: zero padding written at a constant row or column:\n${shared}")
  endif()
endforeach()
# A transpose reads its TMA tile down the columns: the tile is held 128B-swizzled (4-way bank
# conflicts instead of 32-way), and the element code reads it, full tiles and tails, in that layout.
file(STRINGS ${OUT}/conformance_transpose_swizzled.cu reads
     REGEX "= in_[^;]*\\[[^;]*swizzled_128B<float, 64>\\(")
list(LENGTH reads n)
if(n LESS 2)
  message(FATAL_ERROR "transpose_swizzled: the input tile is not read in the 128B-swizzled layout")
endif()
if(NOT nvcc OR nvcc STREQUAL "none")
  message("SKIPPED: nvcc not found (/usr/local/cuda/bin/nvcc or PATH): the emitted CUDA is not assembled")
  return()
endif()
execute_process(COMMAND ${nvcc} -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I${RUNTIME} -I${OUT}
                        -Xptxas -v -cubin -o ${OUT}/all.cubin ${OUT}/all.cu
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc/ptxas failed:\n${out}")
endif()
foreach(bad "are serialized" "C7508")
  string(FIND "${out}" "${bad}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "ptxas: ${bad}:\n${out}")
  endif()
endforeach()
list(LENGTH CASES n)
message("${n} kernels assembled for sm_90a")
