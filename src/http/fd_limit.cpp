#include "http/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace radixserve::http {

OpenFileLimit RaiseOpenFileLimit() {
  OpenFileLimit out;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    RADIX_LOG_WARN("http: getrlimit(RLIMIT_NOFILE) failed: {}", std::strerror(errno));
    return out;
  }
  out.before = out.after = limit.rlim_cur;
  out.hard = limit.rlim_max;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      out.after = raised.rlim_cur;
    } else {
      RADIX_LOG_WARN("http: setrlimit(RLIMIT_NOFILE, {}) failed: {}", raised.rlim_cur,
                     std::strerror(errno));
    }
  }
  RADIX_LOG_INFO("Open file limit (RLIMIT_NOFILE): soft {} -> {}, hard {}", out.before, out.after,
                 out.hard);
  return out;
}

}  // namespace radixserve::http
