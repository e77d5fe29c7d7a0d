#include "rawlog.h"

#include <cstdarg>
#include <cstdio>
#include <unistd.h>

namespace coz {

void raw_log(const char* fmt, ...) {
  char buf[1024] = "coz: ";
  const int prefix = 5;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + prefix, sizeof(buf) - prefix - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = prefix + (static_cast<size_t>(n) < sizeof(buf) - prefix - 1 ? n : sizeof(buf) - prefix - 2);
  buf[len++] = '\n';
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(STDERR_FILENO, buf + off, len - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

}  // namespace coz
