/* coz-perf-warmup: started by `coz run` before the program, so that the
 * program's first perf event does not wait for the kernel.
 *
 * Linux turns on its scheduler hooks for perf events when the first event
 * bound to a task opens on a machine that has none, and that open waits an
 * RCU grace period before it returns (account_event in
 * kernel/events/core.c); the hooks go off again a second after the last
 * such event closes. On a quiet machine the runtime's first open paid the
 * whole wait (13-16 ms on a 2-vCPU VM) before the program's main.
 *
 * This helper opens one disabled software event bound to itself, so the wait
 * runs while the launcher finishes its checks and the program loads, and
 * holds it until standard input ends: the launcher keeps the pipe's other
 * end, which closes when the launcher ends, however it ends. The event
 * counts nothing, is not inherited and touches no other task. Every failure
 * is silent: the program's own open then pays the wait, as it did before.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  /* None of the descriptors the launcher inherited stays open here: the
   * helper needs none, and a caller that waits for the end of a pipe it gave
   * `coz run` (a shell's $(...)) must not wait for the helper too. */
  if (close_range(3, ~0U, 0) != 0) {
    for (long fd = 3, max = sysconf(_SC_OPEN_MAX); fd < max && fd < 65536; ++fd)
      close((int)fd);
  }
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.disabled = 1;
  attr.exclude_kernel = 1; /* allowed at perf_event_paranoid 2 */
  attr.exclude_hv = 1;
  syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  char c;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}
