# Writes OUTPUT, a C++ file defining sparsecc::bench::${FUNCTION}() that returns the text of INPUT as
# one raw string literal (run at build time: cmake -DINPUT=... -DOUTPUT=... -DFUNCTION=... -P).
file(READ "${INPUT}" text)
string(FIND "${text}" ")embedded_source\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )embedded_source\"")
endif()
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${name} by embed_source.cmake at build time; do not edit.\n"
  "namespace sparsecc::bench {\n"
  "const char* ${FUNCTION}() {\n"
  "  return R\"embedded_source(${text})embedded_source\";\n"
  "}\n"
  "}  // namespace sparsecc::bench\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
