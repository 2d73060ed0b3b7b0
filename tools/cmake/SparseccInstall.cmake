# Install rules and the CMake package (find_package(sparsecc CONFIG)): headers, the generator's and
# the runtime's static libraries, the CLI, the kernel templates, and the package files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SPARSECC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparsecc)
set(SPARSECC_INSTALL_TEMPLATEDIR ${CMAKE_INSTALL_DATADIR}/sparsecc/templates)

set_target_properties(sparsecc_bundle_format PROPERTIES EXPORT_NAME bundle_format)
set_target_properties(sparsecc_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(sparsecc_core PROPERTIES EXPORT_NAME core)
set_target_properties(sparsecc_generator PROPERTIES EXPORT_NAME generator)
set_target_properties(sparsecc PROPERTIES EXPORT_NAME sparsecc)

install(TARGETS sparsecc_bundle_format sparsecc_runtime sparsecc_core sparsecc_generator sparsecc
        EXPORT sparseccTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sparseccTargets NAMESPACE sparsecc:: DESTINATION ${SPARSECC_INSTALL_CMAKEDIR})

# Every stage's public headers under include/sparsecc/<stage>/, and the runtime's.
file(GLOB _stage_includes LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/generator/*/include)
foreach(dir IN LISTS _stage_includes ITEMS ${PROJECT_SOURCE_DIR}/runtime/include)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(FILES ${SPARSECC_TEMPLATE_FILES} DESTINATION ${SPARSECC_INSTALL_TEMPLATEDIR})

if(SPARSECC_HAVE_ONNX)
  set(SPARSECC_ONNX_ENABLED TRUE)
else()
  set(SPARSECC_ONNX_ENABLED FALSE)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/sparseccConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sparseccConfig.cmake
                              INSTALL_DESTINATION ${SPARSECC_INSTALL_CMAKEDIR}
                              PATH_VARS SPARSECC_INSTALL_TEMPLATEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sparseccConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparseccConfig.cmake ${PROJECT_BINARY_DIR}/sparseccConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/SparseccKernels.cmake ${CMAKE_CURRENT_LIST_DIR}/SparseccNvJitLink.cmake
        DESTINATION ${SPARSECC_INSTALL_CMAKEDIR})
