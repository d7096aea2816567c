# The generator main on a target registered by the generator binary itself (ZpuMini.cpp): gemm's
# Stmt and ZPU code for zpu_mini, and its overrides.
#   cmake -DGEN=<zpu_mini_gen> -DOUT=<dir> -P check_generator.cmake
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${GEN} -g gemm -o ${OUT} -e stmt,code target=zpu_mini:cores=3 M=100 N=64 K=96
                        TM=32 TN=32 TK=32
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GEN}: exit ${rc}\n${out}${err}")
endif()
foreach(f gemm.stmt gemm.zpu.cpp)
  if(NOT EXISTS ${OUT}/${f})
    message(FATAL_ERROR "missing ${OUT}/${f}")
  endif()
endforeach()
file(READ ${OUT}/gemm.stmt stmt)
if(NOT stmt MATCHES "kernel gemm for zpu_mini" OR NOT stmt MATCHES "tandem_mma")
  message(FATAL_ERROR "gemm.stmt is not zpu_mini's gemm:\n${stmt}")
endif()
execute_process(COMMAND ${GEN} -g gemm -o ${OUT} -e stmt target=zpu_maxi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "unknown target 'zpu_maxi' \\(known: zpu, hopper, ascend, zpu_mini\\)")
  message(FATAL_ERROR "an unknown target must be an error naming the known ones: exit ${rc}\n${out}${err}")
endif()
