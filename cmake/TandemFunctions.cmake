# add_tandem_generator / add_tandem_library, modelled on Halide's add_halide_generator /
# add_halide_library. Included by the installed TandemConfig.cmake and by Tandem's own build.
#
#   add_tandem_generator(gen SOURCES a.cpp ... [LINK_LIBRARIES ...])
#       an executable of the generators in the sources (TANDEM_REGISTER_GENERATOR) with the
#       generator main (-g NAME -o DIR -f FUNCTION -e code,h,library target=T key=value ...)
#   add_tandem_library(lib FROM gen GENERATOR name [FUNCTION_NAME f] [TARGETS zpu|ascend|hopper] [PARAMS k=v ...]
#                      [TUNING_DB uri])
#       a static library `lib` of generator `name` compiled at build time, its header f.h on the
#       include path: int f(halide_buffer_t *...) with Halide's calling convention (the kernel runs
#       on the target's machine model; f_last_cycles() gives the cycles of the last call), and
#       `<lib>_run`, its runner (Halide's RunGenMain): random inputs, cycles and time; --describe.
#       hopper: the kernel compiled by nvcc for sm_90a and the launcher; the buffers' device fields
#       are the device pointers; its runner times it with CUDA events. Without nvcc and the CUDA toolkit a configure-time
#       message says so and the library is skipped (TANDEM_HOPPER_LIBRARIES is then OFF).
#       TUNING_DB: the best record of the tuning database for this generator, target and PARAMS
#       sets the tunable parameters PARAMS does not (`gen -g name --tune` records them); with no
#       record, the defaults, and a note in the build log. A sqlite: file is a dependency: tuning
#       again rebuilds the library.
include_guard(GLOBAL)

function(add_tandem_generator name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "add_tandem_generator(${name}): SOURCES is required")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Tandem::GenMain ${ARG_LINK_LIBRARIES})
endfunction()

function(add_tandem_library lib)
  cmake_parse_arguments(ARG "" "FROM;GENERATOR;FUNCTION_NAME;TUNING_DB" "TARGETS;PARAMS" ${ARGN})
  if(NOT ARG_FROM OR NOT ARG_GENERATOR)
    message(FATAL_ERROR "add_tandem_library(${lib}): FROM <generator executable> and GENERATOR <name> are required")
  endif()
  if(NOT ARG_FUNCTION_NAME)
    set(ARG_FUNCTION_NAME ${lib})
  endif()
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS zpu)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${lib}.tandem)
  set(f ${ARG_FUNCTION_NAME})
  if(ARG_TARGETS STREQUAL "zpu")
    set(outputs ${dir}/${f}.zpu.cpp ${dir}/${f}.lib.cpp)
    set(emit code,h,library)
  elseif(ARG_TARGETS STREQUAL "ascend")
    set(outputs ${dir}/${f}.lib.cpp) # the AscendC kernel inside
    set(emit h,library)
  elseif(ARG_TARGETS STREQUAL "hopper")
    find_program(TANDEM_NVCC nvcc HINTS /usr/local/cuda/bin)
    find_package(CUDAToolkit QUIET)
    if(NOT TANDEM_NVCC OR NOT CUDAToolkit_FOUND)
      message(STATUS "add_tandem_library(${lib}): no nvcc and CUDA toolkit found: the hopper library is skipped")
      set(TANDEM_HOPPER_LIBRARIES OFF PARENT_SCOPE)
      return()
    endif()
    set(TANDEM_HOPPER_LIBRARIES ON PARENT_SCOPE)
    set(outputs ${dir}/${f}.lib.cpp)
    set(emit cuda,h,library)
    add_custom_command(
      OUTPUT ${dir}/${f}.cu.o
      # --fmad=false: each float op rounds as written, as the reference does (a contracted
      # a * b + c differed in 36 of 900 elements of examples/clamped_axpy on an H100).
      COMMAND ${TANDEM_NVCC} -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --fmad=false -I${TANDEM_HOPPER_RUNTIME_DIR}
              -c ${dir}/${f}.cu -o ${dir}/${f}.cu.o
      DEPENDS ${dir}/${f}.cu
      COMMENT "Compiling ${f}.cu for sm_90a"
      VERBATIM)
  else()
    message(FATAL_ERROR "add_tandem_library(${lib}): TARGETS ${ARG_TARGETS}: one of zpu, ascend or hopper "
                        "(one library per target)")
  endif()
  set(tuning)
  set(tuning_depends)
  if(ARG_TUNING_DB)
    set(tuning tuning_db=${ARG_TUNING_DB})
    if(ARG_TUNING_DB MATCHES "^sqlite:(.*)$")
      set(tuning_depends ${CMAKE_MATCH_1})
    endif()
  endif()
  set(generated ${outputs} ${dir}/${f}.h)
  if(ARG_TARGETS STREQUAL "hopper")
    list(APPEND generated ${dir}/${f}.cu)
  endif()
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${ARG_FROM} -g ${ARG_GENERATOR} -o ${dir} -f ${f} -e ${emit} target=${ARG_TARGETS} ${ARG_PARAMS} ${tuning}
    DEPENDS ${ARG_FROM} ${tuning_depends}
    COMMENT "Generating ${f} (${ARG_GENERATOR} for the ${ARG_TARGETS})"
    VERBATIM)
  if(ARG_TARGETS STREQUAL "hopper")
    add_library(${lib} STATIC ${outputs} ${dir}/${f}.cu.o)
    target_include_directories(${lib} PUBLIC ${dir})
    target_link_libraries(${lib} PUBLIC Halide::Runtime CUDA::cudart)
    file(WRITE ${dir}/${f}.run.cpp.in
         "#include \"${f}.h\"\n#include \"RunGenGpu.h\"\n\n"
         "int main(int argc, char **argv) {\n"
         "    return tandem::run_generated_on_gpu(argc, argv, ${f}_metadata(), ${f}_argv);\n}\n")
    configure_file(${dir}/${f}.run.cpp.in ${dir}/${f}.run.cpp COPYONLY)
    add_executable(${lib}_run ${dir}/${f}.run.cpp)
    target_link_libraries(${lib}_run PRIVATE ${lib} Tandem::RunGen)
    return()
  endif()
  add_library(${lib} STATIC ${outputs})
  target_include_directories(${lib} PUBLIC ${dir})
  target_link_libraries(${lib} PUBLIC Tandem::Runtime)
  # The element code rounds each operation as written, as the reference does.
  target_compile_options(${lib} PRIVATE -ffp-contract=off -Wno-unused-variable)
  file(WRITE ${dir}/${f}.run.cpp.in
       "#include \"${f}.h\"\n#include \"RunGen.h\"\n\n"
       "int main(int argc, char **argv) {\n"
       "    return tandem::run_generated(argc, argv, ${f}_metadata(), ${f}_argv, ${f}_last_cycles);\n}\n")
  configure_file(${dir}/${f}.run.cpp.in ${dir}/${f}.run.cpp COPYONLY)
  add_executable(${lib}_run ${dir}/${f}.run.cpp)
  target_link_libraries(${lib}_run PRIVATE ${lib} Tandem::RunGen)
endfunction()
