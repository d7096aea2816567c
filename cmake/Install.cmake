# `cmake --install build --prefix P`: the libraries, the headers a generator or a generated library
# includes, and the package (find_package(Tandem CONFIG)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(tandem_runtime INTERFACE)
target_link_libraries(tandem_runtime INTERFACE tandem_sim Halide::Runtime)
target_include_directories(tandem_runtime INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/backends/ascend/runtime>
                                                    $<INSTALL_INTERFACE:include/ascend>)
add_library(Tandem::Runtime ALIAS tandem_runtime)
add_library(Tandem::GenMain ALIAS tandem_genmain)
add_library(Tandem::Tandem ALIAS tandem_apps)
add_library(Tandem::RunGen ALIAS tandem_rungen)
set_target_properties(tandem_rungen PROPERTIES EXPORT_NAME RunGen)
set_target_properties(tandem_runtime PROPERTIES EXPORT_NAME Runtime)
set_target_properties(tandem_genmain PROPERTIES EXPORT_NAME GenMain)
set_target_properties(tandem_apps PROPERTIES EXPORT_NAME Tandem)

install(TARGETS tandem_sim tandem_dsl tandem_common tandem_zpu tandem_hopper tandem_ascend tandem_apps
                tandem_tune tandem_genmain tandem_rungen tandem_runtime
        EXPORT TandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY dsl/include/tandem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY backends/sim DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES backends/zpu/runtime.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zpu)
install(FILES backends/ascend/runtime/kernel_operator.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ascend)
install(FILES backends/hopper/runtime/tandem_hopper.cuh DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hopper)
install(FILES generator/GenMain.h generator/RunGen.h generator/RunGenGpu.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)
configure_package_config_file(cmake/TandemConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/TandemConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/TandemConfig.cmake cmake/TandemFunctions.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)
set(TANDEM_HOPPER_RUNTIME_DIR ${PROJECT_SOURCE_DIR}/backends/hopper/runtime)
include(cmake/TandemFunctions.cmake)
