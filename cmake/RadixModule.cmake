# Our warning flags. With clang, -Wunknown-warning-option is off: the code silences GCC-only
# warnings (#pragma GCC diagnostic ignored "-Wmaybe-uninitialized", COMPILE_OPTIONS
# -Wno-maybe-uninitialized) that clang does not have, and would otherwise reject as unknown.
set(RADIX_WARNING_FLAGS -Wall -Wextra -Werror
    $<$<CXX_COMPILER_ID:Clang>:-Wno-unknown-warning-option>)

# radix_module(<folder> SOURCES ... [DEPS ...])
# Declares the static library radix_<folder> built from src/<folder>/. Sources are relative to
# the folder. Warnings are errors on our own code; include paths are rooted at src/.
function(radix_module folder)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target radix_${folder})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE ${RADIX_WARNING_FLAGS})
  if(RADIX_FUZZ)
    # Coverage instrumentation for libFuzzer, without its main (tests/fuzz links -fsanitize=fuzzer).
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
endfunction()

# radix_warnings(<target>): the same warning policy for executables.
function(radix_warnings target)
  target_compile_options(${target} PRIVATE ${RADIX_WARNING_FLAGS})
endfunction()
