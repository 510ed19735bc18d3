//! C ABI over minijinja for rendering Hugging Face chat templates (see radix_chat_template.h in
//! src/chat/ for the contract). No Rust panic crosses this boundary: every entry point runs
//! under `catch_unwind` and turns a panic into an error message.

mod environment;
mod pyfmt;

use std::panic::{catch_unwind, AssertUnwindSafe};

use minijinja::Environment;

/// A compiled chat template. Rendering takes `&self`, so one handle may render from many
/// threads at once.
pub struct RadixChatTemplate {
    env: Environment<'static>,
}

/// An owned byte string handed to C; release with `radix_chat_string_free`.
#[repr(C)]
pub struct RadixChatString {
    pub data: *mut u8,
    pub len: usize,
}

impl RadixChatString {
    const EMPTY: RadixChatString = RadixChatString {
        data: std::ptr::null_mut(),
        len: 0,
    };

    fn new(text: String) -> RadixChatString {
        let boxed = text.into_bytes().into_boxed_slice();
        let len = boxed.len();
        let data = Box::into_raw(boxed) as *mut u8;
        RadixChatString { data, len }
    }
}

fn describe(err: &minijinja::Error) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let detail = if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    };
    format!("internal error in the template engine: {detail}")
}

unsafe fn bytes_arg<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data, len)
    }
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|e| format!("{what} is not valid UTF-8: {e}"))
}

/// Compiles `source`. Returns a handle, or null with `*error` set to a message.
///
/// # Safety
/// `source` must point to `len` readable bytes; `error` must be a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn radix_chat_template_new(
    source: *const u8,
    len: usize,
    error: *mut RadixChatString,
) -> *mut RadixChatTemplate {
    let bytes = bytes_arg(source, len);
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<RadixChatTemplate, String> {
        let text = utf8(bytes, "chat template")?;
        let env = environment::build(text).map_err(|e| describe(&e))?;
        Ok(RadixChatTemplate { env })
    }))
    .unwrap_or_else(|payload| Err(panic_message(payload)));
    match result {
        Ok(template) => {
            *error = RadixChatString::EMPTY;
            Box::into_raw(Box::new(template))
        }
        Err(message) => {
            *error = RadixChatString::new(message);
            std::ptr::null_mut()
        }
    }
}

/// Renders with the variables of the JSON object `context`. Returns true with `*out` set to
/// the prompt, or false with `*out` set to an error message.
///
/// # Safety
/// `template` must come from `radix_chat_template_new`; `context` must point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn radix_chat_template_render(
    template: *const RadixChatTemplate,
    context: *const u8,
    len: usize,
    out: *mut RadixChatString,
) -> bool {
    let bytes = bytes_arg(context, len);
    let template = &*template;
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<String, String> {
        let json: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("chat template context is not valid JSON: {e}"))?;
        if !json.is_object() {
            return Err("chat template context must be a JSON object".to_string());
        }
        let tmpl = template
            .env
            .get_template(environment::TEMPLATE_NAME)
            .map_err(|e| describe(&e))?;
        tmpl.render(minijinja::Value::from_serialize(&json))
            .map_err(|e| describe(&e))
    }))
    .unwrap_or_else(|payload| Err(panic_message(payload)));
    match result {
        Ok(text) => {
            *out = RadixChatString::new(text);
            true
        }
        Err(message) => {
            *out = RadixChatString::new(message);
            false
        }
    }
}

/// Releases a handle from `radix_chat_template_new` (null is ignored).
///
/// # Safety
/// `template` must be null or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn radix_chat_template_free(template: *mut RadixChatTemplate) {
    if !template.is_null() {
        drop(Box::from_raw(template));
    }
}

/// Releases a string returned through an out parameter (an empty string is ignored).
///
/// # Safety
/// `s` must be a string from this library, freed once.
#[no_mangle]
pub unsafe extern "C" fn radix_chat_string_free(s: RadixChatString) {
    if !s.data.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            s.data, s.len,
        )));
    }
}
