#include "real.h"

#include <dlfcn.h>
#include <cstdlib>

#include "rawlog.h"

namespace coz {

void* resolve_real(std::atomic<void*>& slot, const char* name, const char* version) {
  void* p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
  if (!p && version) p = dlsym(RTLD_NEXT, name);
  if (!p) {
    raw_log("fatal: cannot find the original '%s' in the C library (%s)", name, dlerror());
    abort();
  }
  slot.store(p, std::memory_order_release);
  return p;
}

}  // namespace coz
