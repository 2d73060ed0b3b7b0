# CUDA::nvJitLink for CMake versions whose FindCUDAToolkit does not name it (before 3.26). Used by the
# build and by the installed package (sparseccConfig.cmake), after find_package(CUDAToolkit).
if(NOT TARGET CUDA::nvJitLink)
  find_library(SPARSECC_NVJITLINK_LIBRARY nvJitLink HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  add_library(CUDA::nvJitLink SHARED IMPORTED)
  set_target_properties(CUDA::nvJitLink PROPERTIES IMPORTED_LOCATION ${SPARSECC_NVJITLINK_LIBRARY}
                                                   INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
endif()
