# Every dependency comes from the system (Debian packages, or the GPU machine's PyTorch wheel).
# Nothing is downloaded at configure, build or test time.

find_package(Torch REQUIRED)            # LibTorch 1.13 (Debian, CPU) or 2.x (PyTorch wheel, CUDA)
find_package(CUDAToolkit REQUIRED)      # NVRTC and headers; the driver (libcuda) is dlopen'ed at run time
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
# CURL (evolve/) joins with the code that uses it; SQLite3 is found in archive/.

# toml++ in header-only mode: one translation unit uses it, and the GPU machine has Debian's
# headers (.device) but not its shared library.
find_path(TOMLPP_INCLUDE_DIR toml++/toml.h REQUIRED)
add_library(kforge_tomlplusplus INTERFACE)
target_include_directories(kforge_tomlplusplus INTERFACE ${TOMLPP_INCLUDE_DIR})
target_compile_definitions(kforge_tomlplusplus INTERFACE TOML_HEADER_ONLY=1 TOML_EXCEPTIONS=1)

# LibTorch's CMake config puts its flags on a global variable; wrap it in a target.
add_library(kforge_torch INTERFACE)
target_link_libraries(kforge_torch INTERFACE ${TORCH_LIBRARIES})
if(TORCH_CXX_FLAGS)
  separate_arguments(_kforge_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(kforge_torch INTERFACE ${_kforge_torch_flags})
endif()
message(STATUS "kforge: LibTorch ${Torch_VERSION} from ${Torch_DIR}")

# LibTorch's <torch/types.h> takes about eleven seconds to compile, in each of some seventy files:
# one precompiled header (kforge_torch_pch, in the top CMakeLists.txt) serves the files that use
# LibTorch and saves about six seconds in each. In a file that does not include LibTorch it costs as
# much as it saves elsewhere, so those are listed and left out. GCC uses the header only where the
# flags and macros it was made with hold (a file built with other flags, such as the generator's
# -ffp-contract=off, compiles the header as before).
option(KFORGE_PCH "Precompile LibTorch's headers once for the files that use them" ON)
# kforge_torch_pch(TARGET [WITHOUT_TORCH FILE...]): TARGET's files use the precompiled header,
# except the listed ones (files that do not include LibTorch, directly or not).
function(kforge_torch_pch target)
  cmake_parse_arguments(ARG "" "" "WITHOUT_TORCH" ${ARGN})
  if(KFORGE_PCH)
    target_precompile_headers(${target} REUSE_FROM kforge_torch_pch)
    if(ARG_WITHOUT_TORCH)
      set_source_files_properties(${ARG_WITHOUT_TORCH} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endif()
endfunction()
message(STATUS "kforge: CUDA Toolkit ${CUDAToolkit_VERSION} (NVRTC in ${CUDAToolkit_LIBRARY_DIR})")

# xxHash: content hashes (task versions, candidate identity, compile cache keys).
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
add_library(kforge_xxhash INTERFACE)
target_include_directories(kforge_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(kforge_xxhash INTERFACE ${XXHASH_LIBRARY})
# cpp-httplib: Debian builds it as a library, with these features. `kforge serve` and the tests'
# loopback LLM endpoint.
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
find_library(HTTPLIB_LIBRARY NAMES cpp-httplib libcpp-httplib.so.0.11 REQUIRED)
add_library(kforge_httplib INTERFACE)
target_include_directories(kforge_httplib INTERFACE ${HTTPLIB_INCLUDE_DIR})
target_link_libraries(kforge_httplib INTERFACE ${HTTPLIB_LIBRARY})
target_compile_definitions(kforge_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT CPPHTTPLIB_BROTLI_SUPPORT)
