/* The native front's `coz run` (front_run.c says what it takes and why). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Whether os.path.abspath leaves `path` as written (after the current
 * folder, when relative): no '.', '..' or empty part, no slash at the end. */
int front_plain_path(const char *path);

/* Starts `coz run`'s program when the command line is one front_run.c takes
 * (argv[1] is "run"), with `library` preloaded; writes the hand-over for
 * COZ_SPAWNED into `handover`. Returns the program's pid, or 0 when it
 * declined (nothing started, nothing changed: the launcher does it all). */
pid_t front_run(int argc, char **argv, const char *library, char *handover, size_t handover_size);
