# radix_cargo_staticlib(<package> <crate folder under rust/>)
# Builds the staticlib crate <package> of the rust/ workspace with cargo and defines:
#   <package>_rs    a target that runs the build (add_dependencies on it)
#   <package>_LIB   (in the caller's scope) the path of lib<package>.a
#   RADIX_CARGO_INCLUDE_DIR (cache) the release output folder, where crates' build scripts may
#                   copy their C headers (llguidance.h)
# Builds use the committed Cargo.lock (--locked) and, by default, no network (--offline): fetch the
# crates once with `cargo fetch --locked --manifest-path rust/Cargo.toml` (scripts/setup does).
# Build trees may share one cargo target dir (scripts/ point RADIX_CARGO_TARGET_DIR at the cache)
# so the crates are compiled once for the Release and the sanitizer builds.
option(RADIX_CARGO_OFFLINE "Build Rust crates with cargo --offline (run cargo fetch first)" ON)

set(RADIX_RUST_DIR ${PROJECT_SOURCE_DIR}/rust)
if(DEFINED ENV{RADIX_CARGO_TARGET_DIR})
  set(RADIX_CARGO_TARGET_DIR $ENV{RADIX_CARGO_TARGET_DIR})
else()
  set(RADIX_CARGO_TARGET_DIR ${PROJECT_BINARY_DIR}/cargo)
endif()
set(RADIX_CARGO_INCLUDE_DIR ${RADIX_CARGO_TARGET_DIR}/release CACHE INTERNAL "")

function(radix_cargo_staticlib package crate)
  find_program(CARGO_EXECUTABLE cargo HINTS $ENV{HOME}/.cargo/bin REQUIRED)
  set(lib ${RADIX_CARGO_TARGET_DIR}/release/lib${package}.a)
  set(flags --release --locked -j1)
  if(RADIX_CARGO_OFFLINE)
    list(APPEND flags --offline)
  endif()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${RADIX_RUST_DIR}/${crate}/src/*.rs)
  add_custom_command(
    OUTPUT ${lib}
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${RADIX_CARGO_TARGET_DIR}
            ${CARGO_EXECUTABLE} build ${flags}
            --manifest-path ${RADIX_RUST_DIR}/Cargo.toml -p ${package}
    DEPENDS ${sources} ${RADIX_RUST_DIR}/Cargo.toml ${RADIX_RUST_DIR}/Cargo.lock
            ${RADIX_RUST_DIR}/${crate}/Cargo.toml
    COMMENT "cargo build rust/${crate}"
    USES_TERMINAL
    VERBATIM)
  add_custom_target(${package}_rs DEPENDS ${lib})
  set(${package}_LIB ${lib} PARENT_SCOPE)
endfunction()
