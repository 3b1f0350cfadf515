# bundlec.cmake: compile ONNX models into C bundles at build time.
#
#   find_package(bundlec REQUIRED CONFIG PATHS path/to/bundlec/cmake)   # or include(.../cmake/bundlec.cmake)
#   bundlec_add_model(net MODEL model.onnx [NAME net] [CPU x86-64-v3,x86-64-v4]
#                     [INPUTS data:1x3x224x224xf32 ...] [OPTIONS --npu vnpu ...])
#   target_link_libraries(app PRIVATE net)
#
# bundlec_add_model runs `bundlec compile` when the model (or bundlec) changes and makes <target> a static library
# of the compiled object with its header directory as a usage requirement (`#include "<name>.h"`). The weights
# are embedded in the object (`--embed-weights`): the program passes NULL as the constant area and needs no
# weights file. The bundle's files are in ${<target>_BUNDLE_DIR}.
#
# bundlec is found as BUNDLEC_EXECUTABLE (a cache variable), else on PATH, else in ${BUNDLEC_ROOT}/target/release
# or /debug.

function(bundlec_add_model target)
  cmake_parse_arguments(ARG "" "MODEL;NAME;CPU" "INPUTS;OPTIONS" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "bundlec_add_model(${target}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_MODEL)
    message(FATAL_ERROR "bundlec_add_model(${target}): MODEL is required")
  endif()
  if(NOT ARG_NAME)
    set(ARG_NAME ${target})
  endif()
  get_filename_component(model "${ARG_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${model}")
    message(FATAL_ERROR "bundlec_add_model(${target}): model ${model} does not exist")
  endif()
  if(NOT BUNDLEC_EXECUTABLE)
    find_program(BUNDLEC_EXECUTABLE bundlec
      HINTS "${BUNDLEC_ROOT}/target/release" "${BUNDLEC_ROOT}/target/debug")
  endif()
  if(NOT BUNDLEC_EXECUTABLE)
    message(FATAL_ERROR "bundlec_add_model(${target}): bundlec not found; set BUNDLEC_EXECUTABLE or BUNDLEC_ROOT")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.bundle")
  set(args compile "${model}" -o "${dir}" --name "${ARG_NAME}" --embed-weights)
  if(ARG_CPU)
    list(APPEND args --cpu "${ARG_CPU}")
  endif()
  foreach(input IN LISTS ARG_INPUTS)
    list(APPEND args --input "${input}")
  endforeach()
  list(APPEND args ${ARG_OPTIONS})
  set(object "${dir}/${ARG_NAME}.o")
  add_custom_command(
    OUTPUT "${object}" "${dir}/${ARG_NAME}.h"
    COMMAND "${BUNDLEC_EXECUTABLE}" ${args}
    DEPENDS "${model}" "${BUNDLEC_EXECUTABLE}"
    COMMENT "bundlec: compiling ${ARG_MODEL} into ${ARG_NAME}"
    VERBATIM)
  set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${target} STATIC "${object}")
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(${target} INTERFACE "${dir}")
  set(${target}_BUNDLE_DIR "${dir}" PARENT_SCOPE)
endfunction()
