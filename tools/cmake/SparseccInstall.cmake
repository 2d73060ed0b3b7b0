# Install rules and the CMake package (find_package(sparsecc CONFIG)): headers, the generator's and
# the runtime's static libraries, the CLI, the kernel templates, and the package files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SPARSECC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparsecc)
set(SPARSECC_INSTALL_TEMPLATEDIR ${CMAKE_INSTALL_DATADIR}/sparsecc/templates)

set_target_properties(sparsecc_bundle_format PROPERTIES EXPORT_NAME bundle_format)
set_target_properties(sparsecc_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(sparsecc_runtime_cpu PROPERTIES EXPORT_NAME runtime_cpu)
set_target_properties(sparsecc PROPERTIES EXPORT_NAME sparsecc)

# Every generator stage (sparsecc::<stage>, EXPORT_NAME set by sparsecc_add_stage) and the aggregates
# sparsecc::core and sparsecc::generator.
get_property(_stage_targets GLOBAL PROPERTY SPARSECC_STAGES)
install(TARGETS sparsecc_bundle_format sparsecc_runtime sparsecc_runtime_cpu ${_stage_targets} sparsecc_core sparsecc_generator sparsecc
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

set(SPARSECC_OPENMP_ENABLED ${SPARSECC_RUNTIME_CPU_OPENMP})
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

# A portable install is a package for machines without a package registry: it also carries the
# build-time dependencies that sparseccConfig.cmake looks for (the headers, CMake package files and
# libraries of nlohmann_json, fmt, zlib and libzip), each under the same path relative to the prefix as
# where it was found, so that their own package files resolve inside the install prefix.
if(SPARSECC_PORTABLE)
  function(_sparsecc_install_dependency prefix)
    foreach(path IN LISTS ARGN)
      if(NOT EXISTS "${path}")
        message(FATAL_ERROR "sparsecc: the portable install needs ${path}, which does not exist")
      endif()
      file(RELATIVE_PATH rel "${prefix}" "${path}")
      if(rel MATCHES "^\\.\\.")
        message(FATAL_ERROR "sparsecc: the portable install needs ${path} under ${prefix}")
      endif()
      get_filename_component(dest "${rel}" DIRECTORY)
      if(IS_DIRECTORY "${path}")
        install(DIRECTORY "${path}" DESTINATION "${dest}")
      else()
        file(REAL_PATH "${path}" real)
        get_filename_component(name "${path}" NAME)
        install(FILES "${real}" DESTINATION "${dest}" RENAME "${name}")
      endif()
    endforeach()
  endfunction()
  # The prefix a package was found under: the parent of its first include directory.
  function(_sparsecc_dependency_prefix target out)
    get_target_property(includes ${target} INTERFACE_INCLUDE_DIRECTORIES)
    list(GET includes 0 include)
    get_filename_component(prefix "${include}" DIRECTORY)
    set(${out} "${prefix}" PARENT_SCOPE)
  endfunction()
  # The files an imported library target names, in every configuration it was imported for.
  function(_sparsecc_imported_files target out)
    set(files)
    if(TARGET ${target})
      get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
      foreach(config IN LISTS configs)
        get_target_property(file ${target} IMPORTED_LOCATION_${config})
        if(file)
          list(APPEND files "${file}")
        endif()
      endforeach()
    endif()
    set(${out} ${files} PARENT_SCOPE)
  endfunction()

  _sparsecc_dependency_prefix(nlohmann_json::nlohmann_json _json_prefix)
  _sparsecc_install_dependency("${_json_prefix}" "${nlohmann_json_DIR}" "${_json_prefix}/include/nlohmann")

  # fmt's package file checks that its shared library exists, so it travels too (sparsecc uses fmt
  # header-only).
  _sparsecc_dependency_prefix(fmt::fmt-header-only _fmt_prefix)
  _sparsecc_imported_files(fmt::fmt _fmt_libraries)
  _sparsecc_install_dependency("${_fmt_prefix}" "${fmt_DIR}" "${_fmt_prefix}/include/fmt" ${_fmt_libraries})

  get_filename_component(_zlib_prefix "${ZLIB_INCLUDE_DIR}" DIRECTORY)
  _sparsecc_install_dependency("${_zlib_prefix}" "${ZLIB_INCLUDE_DIR}/zlib.h" "${ZLIB_INCLUDE_DIR}/zconf.h"
                               ${ZLIB_LIBRARIES})

  _sparsecc_dependency_prefix(libzip::zip _zip_prefix)
  _sparsecc_imported_files(libzip::zip _zip_libraries)
  _sparsecc_install_dependency("${_zip_prefix}" "${libzip_DIR}" "${_zip_prefix}/include/zip.h"
                               "${_zip_prefix}/include/zipconf.h" ${_zip_libraries})
endif()
