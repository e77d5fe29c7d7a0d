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

// Whether the loader's name for an object is the kernel's vDSO
// ("linux-vdso.so.1", "linux-gate.so.1" on 32-bit x86): code with no file.
bool is_vdso(const std::string& name);

// A count that grows whenever an object is loaded or unloaded
// (dl_iterate_phdr's counters, read from the first object); 0 when the
// loader keeps none.
unsigned long long loader_changes();

// --- Objects the program unloaded, for the symbolizer -----------------------
//
// The profiler thread symbolizes stacks at each flush, long after they were
// sampled: by then a library the program dlclose()d, and the dependencies
// that left with it, map nothing, and the loader has forgotten their names.
// So the runtime's dlclose (interpose.cpp) keeps a copy of the objects each
// call unloads; the symbolizer looks there for the addresses that no loaded
// object maps, the most recently unloaded first.
//
// The hooks run in the program thread that calls dlclose, never in signal
// context: they allocate, and copy the objects with loaded_objects(); the
// list's own lock, a leaf, is taken after the loader's is released.

// Before dlclose(handle): copies every loaded object. While the dlclose
// runs, they are all listed (a flush then finds the library half unloaded:
// the symbolizer prefers the loaded ones); dlclose_done keeps the ones it
// unloaded. Returns the token for dlclose_done; 0, nothing to do, for a
// null handle.
uint64_t dlclose_begin(void* handle);
void dlclose_done(uint64_t token);

// The objects unloaded so far, the most recently unloaded first (a dlclose
// under way counts from its start). At most 1024; an object unloaded again
// at the same address replaces its older copy.
std::vector<LoadedObject> unloaded_objects();
// Changes whenever unloaded_objects() does; an atomic read.
uint64_t unloaded_objects_version();

// Fork handlers: the child goes on with the parent's list.
void unloaded_objects_fork_prepare();
void unloaded_objects_fork_parent();
void unloaded_objects_fork_child();

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
