# sparsecc_add_stage(<stage> [DEPENDS <stage>...] [LIBRARIES <target>...] [PRIVATE_LIBRARIES <target>...])
#
# One generator stage as the static library sparsecc_<stage> (alias sparsecc::<stage>), from the
# sources of the calling folder's src/ and with its include/ as the only public include directory.
# DEPENDS names the stages below it whose headers it includes (exactly those: a stage that includes
# a header of a stage it does not name fails to build); LIBRARIES and PRIVATE_LIBRARIES other
# targets. Installed, every stage's headers share include/ (tools/cmake/SparseccInstall.cmake).
# Stages are appended to the global property SPARSECC_STAGES, in the order they are added.
function(sparsecc_add_stage stage)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPENDS;LIBRARIES;PRIVATE_LIBRARIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "sparsecc_add_stage(${stage}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(target sparsecc_${stage})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  add_library(${target} STATIC ${sources})
  add_library(sparsecc::${stage} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${stage})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                              $<INSTALL_INTERFACE:include>)
  # The headers use C++20 (std::span, designated initializers): consumers get the standard too.
  target_compile_features(${target} PUBLIC cxx_std_20)
  set(deps)
  foreach(dep IN LISTS arg_DEPENDS)
    if(NOT TARGET sparsecc_${dep})
      message(FATAL_ERROR "sparsecc_add_stage(${stage}): stage ${dep} is not defined yet; "
                          "a stage depends only on stages below it")
    endif()
    list(APPEND deps sparsecc_${dep})
  endforeach()
  target_link_libraries(${target} PUBLIC ${deps} ${arg_LIBRARIES} PRIVATE ${arg_PRIVATE_LIBRARIES})
  set_property(GLOBAL APPEND PROPERTY SPARSECC_STAGES ${target})
endfunction()
