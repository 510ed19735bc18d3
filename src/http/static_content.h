// Hook for serving bytes compiled into the binary (the web UI is a later issue): a Handler that
// answers every request with the same bytes.
#pragma once

#include <string>

#include "http/router.h"

namespace radixserve::http {

Handler StaticContentHandler(std::string content_type, std::string bytes);

}  // namespace radixserve::http
