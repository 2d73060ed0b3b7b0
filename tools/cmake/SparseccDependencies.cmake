# Third-party dependencies, all from Debian's packages (tools/setup.sh installs them). In portable
# mode (SPARSECC_PORTABLE) libzip comes from tools/portable/build-deps.sh as a static library, fmt is
# used header-only, zlib and GoogleTest are linked statically, and so are libstdc++ and libgcc.

find_package(CUDAToolkit 12.0 REQUIRED)
# The compile driver assembles PTX through nvJitLink.
include(SparseccNvJitLink)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)

if(SPARSECC_PORTABLE)
  set(ZLIB_USE_STATIC_LIBS ON)
endif()
find_package(ZLIB REQUIRED)
find_package(libzip REQUIRED)

if(SPARSECC_PORTABLE)
  get_target_property(_zip_type libzip::zip TYPE)
  if(NOT _zip_type STREQUAL "STATIC_LIBRARY")
    message(FATAL_ERROR "SPARSECC_PORTABLE needs a static libzip: run tools/portable/build.sh "
                        "(it builds one and passes its prefix in CMAKE_PREFIX_PATH)")
  endif()
  set(SPARSECC_FMT fmt::fmt-header-only)
  add_link_options(-static-libstdc++ -static-libgcc)
  # Programs that use the CUDA runtime API (the bench harness and its vendor baselines) link this.
  set(SPARSECC_CUDART CUDA::cudart_static)
else()
  set(SPARSECC_FMT fmt::fmt)
  set(SPARSECC_CUDART CUDA::cudart)
endif()

include(SparseccOnnx)

# Binaries find the CUDA libraries (NVRTC, cuBLAS, cuSPARSE) where the toolkit keeps them.
set(CMAKE_BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
set(CMAKE_INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
