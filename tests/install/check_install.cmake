# Installs Tandem into a fresh prefix, configures and builds the out-of-tree example
# (examples/clamped_axpy: its own generator, add_tandem_library, a main calling the library with
# Halide::Runtime::Buffer) against it, and runs the example.
#   cmake -DBUILD=<Tandem's build dir> -DSOURCE=<Tandem's source dir> -DWORK=<scratch> -P check_install.cmake
file(REMOVE_RECURSE ${WORK})
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
step("install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
set(launcher)
find_program(CCACHE ccache)
if(CCACHE)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE})
endif()
step("configure the example" ${CMAKE_COMMAND} -S ${SOURCE}/examples/clamped_axpy -B ${WORK}/build -G Ninja
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK}/prefix ${launcher})
step("build the example" ${CMAKE_COMMAND} --build ${WORK}/build -j2)
step("run the example" ${WORK}/build/clamped_axpy_main)
message(STATUS "${last_output}")
step("run the library's runner" ${WORK}/build/clamped_axpy_zpu_run --iterations 2)
message(STATUS "${last_output}")
if(EXISTS ${WORK}/build/clamped_axpy_gpu)
  # Built and linked wherever nvcc is; it runs on a Hopper GPU (77: none here).
  execute_process(COMMAND ${WORK}/build/clamped_axpy_gpu RESULT_VARIABLE status OUTPUT_VARIABLE out)
  if(NOT status EQUAL 0 AND NOT status EQUAL 77)
    message(FATAL_ERROR "the hopper library failed (${status}): ${out}")
  endif()
  message(STATUS "the hopper library: ${out}")
endif()
