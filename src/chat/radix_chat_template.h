// C ABI of the Rust crate rust/chat_template (minijinja with Hugging Face's chat-template
// environment). Only chat_template.cpp should include this; everything else uses ChatTemplate.
//
// Contract: no function panics or throws across the boundary. Strings returned through a
// RadixChatString out-parameter are owned by the caller and must be released with
// radix_chat_string_free (data may be null when len is 0). A template handle is immutable after
// creation: radix_chat_template_render may be called on one handle from many threads at once.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadixChatTemplate RadixChatTemplate;

typedef struct RadixChatString {
  char* data;  // UTF-8, not NUL-terminated
  size_t len;
} RadixChatString;

// Compiles `source` (len bytes of UTF-8 Jinja). Returns null on a syntax error and sets *error
// to the message; on success *error is empty.
RadixChatTemplate* radix_chat_template_new(const char* source, size_t len, RadixChatString* error);

// Renders with the variables of the JSON object `context` (len bytes). Returns true with *out
// holding the rendered text, or false with *out holding an error message.
bool radix_chat_template_render(const RadixChatTemplate* tmpl, const char* context, size_t len,
                                RadixChatString* out);

void radix_chat_template_free(RadixChatTemplate* tmpl);
void radix_chat_string_free(RadixChatString s);

#ifdef __cplusplus
}  // extern "C"
#endif
