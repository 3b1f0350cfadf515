# find_package(bundlec) support: point CMake at this folder (bundlec_DIR, CMAKE_PREFIX_PATH or PATHS) to get
# bundlec_add_model (bundlec.cmake). BUNDLEC_ROOT defaults to the checkout this folder belongs to, so a bundlec
# built there is found without setting BUNDLEC_EXECUTABLE.
if(NOT BUNDLEC_ROOT)
  get_filename_component(BUNDLEC_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
include("${CMAKE_CURRENT_LIST_DIR}/bundlec.cmake")
set(bundlec_FOUND TRUE)
