// SyncPerf's counters for joins (issue 13, point 1): a join is counted as an
// acquisition of the joined thread's handle, without a hold.
#include <gtest/gtest.h>
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstring>

#include "locks.h"
#include "sync_hooks.h"
#include "thread_state.h"

using namespace coz;

TEST(Locks, JoinsAreCountedPerThreadHandleWithoutHolds) {
  EXPECT_STREQ(lock_kind_name(LockKind::kJoin), "join");
  ThreadState t;
  int first, second;  // two joined threads' handles
  const uintptr_t site = 0x4001;
  lock_acquired(&t, LockKind::kJoin, &first, site, false, 0);       // the thread had ended
  lock_acquired(&t, LockKind::kJoin, &second, site, true, 7000000);  // it still ran: 7 ms waited
  LockMerger m;
  m.take(3, *t.locks, true);
  auto objects = m.objects();
  ASSERT_EQ(objects.size(), 2u);
  const LockTotals& a = objects[reinterpret_cast<uintptr_t>(&first)];
  const LockTotals& b = objects[reinterpret_cast<uintptr_t>(&second)];
  EXPECT_EQ(a.kind, LockKind::kJoin);
  EXPECT_EQ(a.all.acquisitions, 1u);
  EXPECT_EQ(a.all.contended, 0u);
  EXPECT_EQ(b.all.contended, 1u);
  EXPECT_EQ(b.all.wait_ns, 7000000u);
  EXPECT_EQ(t.locks->nheld, 0u) << "a join holds nothing: no hold time, no slot of the held table";
  EXPECT_EQ(b.sites.count(site - 1), 1u) << "the call site of the join";
  free_lock_table(t.locks);
}

namespace {
int quick_c11(void*) { return 43; }
}  // namespace

TEST(Locks, JoinTriesSayWhetherTheThreadStillRuns) {
  EXPECT_TRUE(join_taken(EBUSY));
  EXPECT_FALSE(join_taken(0));
  EXPECT_TRUE(join_got(0));
  EXPECT_EQ(timed_join_wait(ETIMEDOUT), WaitKind::kSleep);
  EXPECT_EQ(join_wait(0), WaitKind::kSync);
  // thrd_join's try gives C11's codes and the thread's int result.
  thrd_t thr;
  ASSERT_EQ(thrd_create(&thr, quick_c11, nullptr), thrd_success);
  int res = 0, rc;
  while ((rc = c11_tryjoin(thr, &res, pthread_tryjoin_np)) == thrd_busy) thrd_yield();
  EXPECT_EQ(rc, thrd_success);
  EXPECT_EQ(res, 43);
}
