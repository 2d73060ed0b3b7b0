# ONNX models through Debian's libonnx-dev and libprotobuf-dev, when they are installed: without them
# sparsecc builds all the same and reading an .onnx file is a usage error. The portable build goes
# without (libonnx ships no static library). SPARSECC_HAVE_ONNX says what was found, and
# SPARSECC_ONNX_LIBRARIES names what a target that uses libonnx's classes links.
include(CMakeDependentOption)
cmake_dependent_option(SPARSECC_WITH_ONNX "Read ONNX models (libonnx-dev and libprotobuf-dev, when installed)" ON
                       "NOT SPARSECC_PORTABLE" OFF)
set(SPARSECC_HAVE_ONNX OFF)
set(SPARSECC_ONNX_LIBRARIES)
if(SPARSECC_WITH_ONNX)
  # libonnx's package refers to protobuf::libprotobuf, so Protobuf comes first.
  find_package(Protobuf QUIET)
  if(Protobuf_FOUND AND TARGET protobuf::libprotobuf)
    find_package(ONNX CONFIG QUIET)
  endif()
  if(ONNX_FOUND AND TARGET onnx AND TARGET onnx_proto)
    set(SPARSECC_HAVE_ONNX ON)
    # onnx: shape inference (compile-model --n-from-shapes); onnx_proto: the protobuf classes.
    set(SPARSECC_ONNX_LIBRARIES onnx onnx_proto protobuf::libprotobuf)
  endif()
endif()
if(SPARSECC_HAVE_ONNX)
  message(STATUS "sparsecc: ONNX support on (libonnx ${ONNX_VERSION}, protobuf ${Protobuf_VERSION})")
elseif(SPARSECC_PORTABLE)
  message(STATUS "sparsecc: ONNX support off (portable build: libonnx has no static library)")
elseif(SPARSECC_WITH_ONNX)
  message(STATUS "sparsecc: ONNX support off (libonnx-dev or libprotobuf-dev not found)")
else()
  message(STATUS "sparsecc: ONNX support off (SPARSECC_WITH_ONNX=OFF)")
endif()
