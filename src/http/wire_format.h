// Bytes on the wire for responses: status line + headers, Server-Sent-Events framing and
// HTTP/1.1 chunked transfer coding. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "http/request.h"

namespace radixserve::http {

// "HTTP/1.1 <status> <reason>\r\n<name>: <value>\r\n...\r\n". Header values must not hold CR/LF
// (RADIX_CHECK: headers come from our own code, never echoed raw from input).
std::string FormatResponseHead(int status, const HeaderList& headers);

// One SSE event: every line of `data` prefixed with "data: ", then a blank line.
std::string FormatSseEvent(std::string_view data, std::string_view event = {});

// One chunk of chunked transfer coding ("<hex size>\r\n<data>\r\n"); empty data is not allowed.
std::string FormatChunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace radixserve::http
