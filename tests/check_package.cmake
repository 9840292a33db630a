# Installs loom from its build tree to a fresh prefix, then configures, builds and runs tests/package against
# that prefix alone, as a project outside loom's tree would. Any failing step fails the test.
# Run as: cmake -DBUILD_DIR=<loom build> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch> -DCXX=<compiler>
#               -P tests/check_package.cmake
cmake_minimum_required(VERSION 3.25)
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "package check: ${what} failed (${status}):\n${output}")
  endif()
  message(STATUS "package check: ${what}: ok")
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run_step("cmake --install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(installed include/loom/loom.hpp lib/cmake/loom/loomConfig.cmake lib/cmake/loom/loomConfigVersion.cmake)
  if(NOT EXISTS "${prefix}/${installed}")
    message(FATAL_ERROR "package check: ${installed} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE internal "${prefix}/include/loom/framework/kernels/*" "${prefix}/include/loom/*/detail/*")
if(internal)
  message(FATAL_ERROR "package check: internal headers were installed: ${internal}")
endif()
run_step("configuring the consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/package" -B "${WORK_DIR}/build"
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release)
run_step("building the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run_step("running the consumer" "${WORK_DIR}/build/consumer")
message(STATUS "${step_output}")
