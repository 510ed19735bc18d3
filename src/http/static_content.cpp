#include "http/static_content.h"

#include <memory>

namespace radixserve::http {

Handler StaticContentHandler(std::string content_type, std::string bytes) {
  auto type = std::make_shared<const std::string>(std::move(content_type));
  auto body = std::make_shared<const std::string>(std::move(bytes));
  return [type, body](const Request&, ResponderPtr responder) {
    responder->Send(200, *type, *body);
  };
}

}  // namespace radixserve::http
