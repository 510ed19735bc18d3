//! llguidance (grammar-constrained decoding) linked as a static library for radixserve.
//!
//! The C API is llguidance's own: the `#[no_mangle] extern "C"` functions of `llguidance::ffi`,
//! declared in the `llguidance.h` that the crate's build script copies next to the library
//! (`$CARGO_TARGET_DIR/release/llguidance.h`). They catch panics themselves and report errors as
//! values, so this crate only has to make sure they are linked in. C++ wraps them in
//! `src/sampling/grammar_*.h`.

pub use llguidance::ffi;

/// The llguidance version string (`llguidance@x.y.z ...`); referencing one function keeps the
/// dependency in the link even if a future toolchain prunes unreferenced upstream crates.
#[no_mangle]
pub extern "C" fn radix_grammar_version() -> *const std::ffi::c_char {
    llguidance::ffi::llg_get_version()
}
