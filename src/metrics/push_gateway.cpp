#include "metrics/push_gateway.h"

#include <curl/curl.h>

#include <cstdio>
#include <map>
#include <memory>

#include "common/base64.h"
#include "common/log.h"
#include "metrics/registry.h"
#include "metrics/text_format.h"

namespace radixserve::metrics {
namespace {

// urllib.parse.quote_plus for a value without spaces (those go base64, below): letters, digits
// and "_.-~" stay, every other byte becomes %XX.
std::string PercentEncode(const std::string& value) {
  std::string out;
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-' || c == '~') {
      out += ch;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// prometheus_client's _escape_grouping_key: one "/key/value" path segment pair.
std::string GroupingSegment(const std::string& key, const std::string& value) {
  if (value.empty()) return "/" + key + "@base64/=";
  if (value.find_first_of("/ ") != std::string::npos) {
    return "/" + key + "@base64/" + Base64Encode(value, Base64Alphabet::kUrlSafe);
  }
  return "/" + key + "/" + PercentEncode(value);
}

size_t DiscardResponse(char*, size_t size, size_t count, void*) { return size * count; }

// libcurl's progress callback: a non-zero return aborts the transfer (shutdown).
int AbortWhenStopping(void* flag, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(flag)->load() ? 1 : 0;
}

}  // namespace

Expected<std::string> PushUrl(const PushGatewayOptions& options) {
  std::string url = options.gateway;
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) url = "http://" + url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  std::map<std::string, std::string> grouping;
  for (const std::string& item : options.grouping_key) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || item.find('=', eq + 1) != std::string::npos) {
      return InvalidArgument("'" + item + "' is not of the form key=value (exactly one '=')");
    }
    std::string key = item.substr(0, eq);
    if (!IsValidLabelName(key)) {
      return InvalidArgument("'" + key + "' (in '" + item +
                             "') is not a valid Prometheus label name");
    }
    grouping[std::move(key)] = item.substr(eq + 1);
  }
  url += "/metrics";
  url += GroupingSegment("job", options.job);
  for (const auto& [key, value] : grouping) url += GroupingSegment(key, value);
  return url;
}

MetricsPusher::MetricsPusher(PushGatewayOptions options, std::string url,
                             std::function<std::string()> body)
    : options_(std::move(options)), url_(std::move(url)), body_(std::move(body)) {
  thread_ = std::thread([this] { Run(); });
}

MetricsPusher::~MetricsPusher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  abort_transfer_ = true;
  wake_.notify_all();
  thread_.join();
}

void MetricsPusher::Run() {
  RADIX_LOG_INFO("Pushing metrics to {} every {} s.", url_, options_.interval.count());
  bool failing = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    const std::optional<std::string> error = PushOnce(body_());
    lock.lock();
    if (stopping_) break;
    if (error && !failing) {
      RADIX_LOG_WARN("Pushing metrics to {} failed: {}; retrying every {} s.", url_, *error,
                     options_.interval.count());
    } else if (!error && failing) {
      RADIX_LOG_INFO("Pushing metrics to {} works again.", url_);
    }
    failing = error.has_value();
    wake_.wait_for(lock, options_.interval, [this] { return stopping_; });
  }
}

std::optional<std::string> MetricsPusher::PushOnce(const std::string& text) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return "libcurl could not start a transfer";
  CURL* h = curl.get();
  curl_slist* headers =
      curl_slist_append(nullptr, (std::string("Content-Type: ") + Registry::kContentType).c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
  curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, text.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(text.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, DiscardResponse);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, AbortWhenStopping);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &abort_transfer_);
  if (options_.basic_auth) {
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.basic_auth->first.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.basic_auth->second.c_str());
  }
  const CURLcode code = curl_easy_perform(h);
  if (code != CURLE_OK) return curl_easy_strerror(code);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400) return "HTTP status " + std::to_string(status);
  return std::nullopt;
}

}  // namespace radixserve::metrics
