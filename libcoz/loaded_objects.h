// The objects the dynamic loader has mapped, copied out of dl_iterate_phdr.
//
// dl_iterate_phdr holds the loader's lock while it calls back, and a program
// thread may wait for that lock while it holds a lock of its own: libunwind
// takes it in our sample handler, which can interrupt the program's malloc
// inside its critical section. A callback that allocates then waits for the
// program's malloc lock while the program waits for the loader's: both stop
// for good (a program with its own malloc did, 1 run in about 300). So the
// runtime's callbacks copy into memory allocated before the call and do
// nothing else; the work on the objects happens after the lock is released.
#pragma once

#include <link.h>

#include <cstdint>
#include <string>
#include <vector>

namespace coz {

struct LoadedObject {
  std::string name;  // as the loader gives it: empty for the main program
  uintptr_t bias = 0;  // dlpi_addr
  bool is_main = false;  // the first object listed
  std::vector<ElfW(Phdr)> phdrs;
};

// Every loaded object, in the loader's order, the main program first.
std::vector<LoadedObject> loaded_objects();

// --- A published copy, for libunwind in program threads ------------------
//
// libunwind finds an address's unwind tables with dl_iterate_phdr. In a
// program thread that is the loader's lock taken inside the program: in the
// sample handler, which may have interrupted the thread in the middle of
// taking that very lock (it waits for itself) or inside a lock that the
// lock's holder waits for; and after a contended lock, whose waiters another
// thread may hold the loader's lock for. So while `tls_objects_from_copy`
// is set, the runtime's dl_iterate_phdr (interpose.cpp) answers from a copy
// published outside those contexts, and never takes the lock.

// Publishes `objects` (a fresh loaded_objects()) as the copy (not in signal
// context: it allocates). The runtime calls it at start and when objects
// change.
void publish_loaded_objects(std::vector<LoadedObject> objects);

// Walks the published copy as dl_iterate_phdr would. An object that is no
// longer loaded where it was (per _dl_find_object, glibc 2.35 on; lock-free)
// is skipped. Async-signal-safe. Without a copy, calls nothing and returns 0.
int iterate_published_objects(int (*callback)(dl_phdr_info*, size_t, void*), void* data);

extern __thread int tls_objects_from_copy __attribute__((tls_model("initial-exec")));
struct ObjectsFromCopy {
  ObjectsFromCopy() { tls_objects_from_copy++; }
  ~ObjectsFromCopy() { tls_objects_from_copy--; }
};

}  // namespace coz
