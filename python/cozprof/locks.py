"""SyncPerf's diagnosis of locks and thread groups, from a profile's counters.

`analyze_locks(profile, ...)` reads the synchronization counters of one run
(`locks` and `thread` records, docs/profile-format.md) and returns the object
specified in docs/locks.md: every lock family with its figures, the findings
(SyncPerf's quadrants, asymmetric contention, try-lock failures, load
imbalance), each joined to the causal profile when one is given.

The reasoning behind every threshold and rule is in docs/locks.md; the
method is SyncPerf's (Alam et al., EuroSys 2017), section 2.
"""

import heapq
import math
import re

from .errors import CozError
from . import profile as profile_mod
from .profile import KILLED

SCHEMA = 1

# Defaults of the thresholds (SyncPerf section 4.1: "contention rate larger than
# 10% is considered to be high, and the number of lock acquisitions larger than
# 1000 per second is considered to be high").
FREQUENCY = 1000.0          # acquisitions per second from which a lock is "frequent"
CONTENTION = 0.10           # fraction of acquisitions that waited, from which a lock is "contended"
LONG_HOLD_NS = 100_000      # mean critical section (100 us) from which a rare contended lock is reported (Q1)
SHORT_HOLD_NS = 1_000       # mean critical section (1 us) under which a frequent lock's work is "a few instructions"
ASYMMETRY = 2.0             # contention ratio between objects of one family (SyncPerf 2.1.4: "2x or more")
IMBALANCE = 0.20            # difference of waiting shares between thread groups (SyncPerf 2.1.5: "say 20%")

# Lock-like kinds: the quadrants apply to them. Condition variables, barriers,
# semaphores and raw futexes always wait by design; their waits feed the load
# imbalance analysis (the `thread` records) and are listed, not classified.
LOCK_KINDS = ("mutex", "rwlock", "spinlock", "c11-mutex")
# Joins are not locks either: a join waits when the joined thread still runs,
# which is the joiner waiting for another thread's work (load imbalance, not
# contention), and their "frequency" is the rate of thread ends. They are
# listed apart (`joins`), per call site, beside the load imbalance analysis.
JOIN_KINDS = ("join",)

ASYMMETRY_MIN_ACQUISITIONS = 20   # objects with fewer acquisitions are not compared
ASYMMETRY_Z = 3.29                # Wilson intervals at 99.9%: many objects are compared at once
TOP_MEMBERS = 5                   # objects of a family listed in the JSON
TOP_SITES = 5                     # acquisition sites of a lock joined to the causal profile
SOURCE_SCAN_LINES = 400           # how far the source is read after an acquisition for its release

SYNC_WAITS = ("lock", "sync")     # wait categories that are waiting for other threads
MAIN_GROUP = "main"

CATEGORIES = ("improper-granularity", "asymmetric-contention", "over-synchronization",
              "improper-primitive", "load-imbalance")

_COUNTERS = ("acquisitions", "contended", "wait_ns", "hold_ns", "trylocks", "trylock_failures", "hold_top_ns")
# The estimates' standard errors (0: exact), added as variances.
_ERRORS = ("acquisitions_sd", "hold_sd_ns")


# -- choosing the run --------------------------------------------------------

def has_counters(run):
    return run.locks is not None or bool(run.threads)


def choose_run(profile, pid=None):
    """The run whose counters are analysed, and the other runs that have some.

    With `pid`, the run of that process (the last one if several). Otherwise the
    last run without experiments (--locks-only or --sampling-only: its counters
    are not disturbed by the delays of experiments), else the last run with
    counters. Raises CozError when no run qualifies."""
    candidates = [r for r in profile.runs if has_counters(r)]
    if pid is not None:
        mine = [r for r in candidates if r.startup.get("pid") == pid]
        if not mine:
            known = sorted({r.startup.get("pid") for r in candidates if r.startup.get("pid") is not None})
            raise CozError(f"no run of process {pid} with synchronization counters",
                           hint="processes with counters: " + (", ".join(map(str, known)) or "none"))
        chosen = mine[-1]
    elif not candidates:
        hint = "profile with 'coz run --locks-only --- ./program' (a causal 'coz run' writes them too)"
        if profile.lacks_final_records():
            # (counters are written at the stack flushes, and at the end: a
            # program that took no lock writes its joins and groups at the end only)
            hint = (f"the run ended without its final records ({KILLED}), or still runs: "
                    "it wrote no counters before")
        raise CozError("no synchronization counters in " + ", ".join(profile.paths), hint=hint)
    else:
        quiet = [r for r in candidates if r.quiet]
        chosen = (quiet or candidates)[-1]
    return chosen, [r for r in candidates if r is not chosen]


def run_length_ns(run):
    """The run's length: `elapsed_ns` of its last `locks` record, else the
    `wall_ns` of its `counters` record, else 0."""
    if run.locks is not None:
        return _nonneg(run.locks.get("elapsed_ns", 0))
    return _nonneg((run.counters or {}).get("wall_ns", 0))


def _describe_run(run):
    return {"path": run.path, "index": run.index, "pid": run.startup.get("pid"),
            "argv0": run.startup.get("argv0"), "mode": run.mode, "elapsed_ns": run_length_ns(run)}


# -- figures -----------------------------------------------------------------

def _nonneg(v):
    return v if (type(v) is int or type(v) is float) and v > 0 else 0


def _counters(rec):
    """The six counters of a record (a lock, a folded entry, a site); anything
    but a positive number counts as 0."""
    out = {k: _nonneg(rec.get(k, 0)) for k in _COUNTERS}
    for k in _ERRORS:
        out[k + "_var"] = _nonneg(rec.get(k, 0)) ** 2
    return out


def _add(into, c):
    for k in _COUNTERS:
        into[k] += c[k]
    for k in _ERRORS:  # independent samplings: variances add
        into[k + "_var"] = into.get(k + "_var", 0) + c.get(k + "_var", 0)


def figures(c, elapsed_ns, threads=1):
    """Rates and means of one set of counters over `elapsed_ns` of run, used by
    `threads` threads."""
    acq, cont = c["acquisitions"], c["contended"]
    elapsed_s = elapsed_ns / 1e9
    users = max(1, threads)
    return {
        "acquisitions": acq,
        "acquisitions_sd": math.sqrt(c.get("acquisitions_sd_var", 0)),
        "frequency": acq / elapsed_s if elapsed_s > 0 else 0.0,
        "contended": cont,
        "contention": cont / acq if acq else 0.0,
        "wait_ns": c["wait_ns"],
        "mean_wait_ns": c["wait_ns"] / cont if cont else 0.0,
        "wait_share": c["wait_ns"] / elapsed_ns if elapsed_ns > 0 else 0.0,
        "waiting_share": c["wait_ns"] / (users * elapsed_ns) if elapsed_ns > 0 else 0.0,
        "wait_per_acquisition_ns": c["wait_ns"] / acq if acq else 0.0,
        "hold_ns": c["hold_ns"],
        "hold_sd_ns": math.sqrt(c.get("hold_sd_ns_var", 0)),
        "mean_hold_ns": c["hold_ns"] / acq if acq else 0.0,
        "mean_hold_trimmed_ns": max(0, c["hold_ns"] - c.get("hold_top_ns", 0)) / acq if acq else 0.0,
        "hold_share": c["hold_ns"] / elapsed_ns if elapsed_ns > 0 else 0.0,
        "trylocks": c["trylocks"],
        "trylock_failures": c["trylock_failures"],
        "trylock_failure_rate": c["trylock_failures"] / c["trylocks"] if c["trylocks"] else 0.0,
        "trylock_frequency": c["trylocks"] / elapsed_s if elapsed_s > 0 else 0.0,
    }


def contended_by(fig, th):
    """Why a lock counts as contended: "rate" (at least th["contention"] of its
    acquisitions found it taken, SyncPerf's measure), "waiting" (its users spent
    at least that share of their time waiting for it), both, or None."""
    rate = fig["contention"] >= th["contention"]
    waiting = fig.get("waiting_share", 0.0) >= th["contention"]
    if rate and waiting:
        return "rate and waiting"
    return "rate" if rate else "waiting" if waiting else None


def short_sections(fig, th):
    """Whether the critical sections count as "a few instructions": their
    mean hold, with the weightiest sampled hold of each thread's count taken
    once instead of 64 times (`mean_hold_trimmed_ns`), is under
    th["short_hold_ns"]. A sampled hold timed across a preemption of its
    holder counts 64 times (docs/locks.md section 1): one such hold in a
    short run lifts the mean of a two-instruction section past a
    microsecond (section 4)."""
    return fig.get("mean_hold_trimmed_ns", fig.get("mean_hold_ns", 0)) < th["short_hold_ns"]


def quadrant(fig, th, preempted_holders=True):
    """SyncPerf's figure 1: Q2 frequent and contended, Q4 frequent only, Q1
    contended only, Q3 neither (contended: see contended_by). With
    `preempted_holders`, waits at a low rate around critical sections of a
    few instructions do not make a lock contended (below)."""
    frequent = fig["frequency"] >= th["frequency"]
    why = contended_by(fig, th)
    if preempted_holders and why == "waiting" and 0 < fig.get("mean_hold_ns", 0) and short_sections(fig, th):
        # Waits without a contention rate, around a few instructions: a
        # holder lost its CPU inside one (a loaded machine). The acquisitions
        # are still the cost; splitting the lock would not help. Measured on
        # locks_primitive (4096 cell locks) beside 3 busy loops on 2 CPUs:
        # 0.001% to 0.01% of the acquisitions waited, but 3 to 40 waits of
        # 0.2 to 7.5 ms each made the waiting 0.1% to 10% of the threads'
        # time. (One object taking the traffic and these waits is still
        # asymmetric contention: see asymmetry().)
        why = None
    contended = why is not None
    if frequent:
        return "Q2" if contended else "Q4"
    return "Q1" if contended else "Q3"


def wilson(successes, n, z=ASYMMETRY_Z):
    """Wilson score interval of a proportion."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


# -- families ----------------------------------------------------------------

class _Family:
    """The objects of one kind initialized (or first used) at one call site: one
    lock in SyncPerf's call-site integration."""

    def __init__(self, kind, site):
        self.kind = kind
        self.site = site
        self.members = []          # (lock record, its counters)
        self.folded = []           # folded records
        self.objects = 0           # objects counted one by one (folded ones apart)
        self.total = dict.fromkeys(_COUNTERS, 0)
        self.sites = {}            # acquisition site -> counters (+ "held")
        self.threads = 0           # most threads any one object saw
        self.single_thread = True  # every object was used by one thread at most

    def add(self, rec, folded=False):
        c = _counters(rec)
        _add(self.total, c)
        if folded:
            self.folded.append(rec)
        else:
            self.members.append((rec, c))
            self.objects += 1
        threads = rec.get("threads")
        if isinstance(threads, int) and threads >= 0:
            self.threads = max(self.threads, threads)
            if threads > 1:
                self.single_thread = False
        else:
            self.single_thread = False   # unknown: never claim it
        for s in rec.get("sites") or ():
            if not isinstance(s, dict) or not isinstance(s.get("site"), str):
                continue
            entry = self.sites.get(s["site"])
            if entry is None:
                entry = self.sites[s["site"]] = dict.fromkeys(_COUNTERS, 0)
            _add(entry, _counters(s))
            held = s.get("held")
            if isinstance(held, dict):
                into = entry.setdefault("held", {})
                for line, n in held.items():
                    if isinstance(line, str):
                        into[line] = into.get(line, 0) + _nonneg(n)


def _families(locks_rec):
    fams = {}
    for rec in locks_rec.get("locks") or ():
        if not isinstance(rec, dict):
            continue
        kind = rec.get("kind") if isinstance(rec.get("kind"), str) else "unknown"
        site = rec.get("site") if isinstance(rec.get("site"), str) else None
        key = (kind, site) if site is not None else (kind, None, rec.get("id"), rec.get("address"))
        fam = fams.get(key)
        if fam is None:
            fam = fams[key] = _Family(kind, site)
        fam.add(rec)
    # Folded entries are counted per call site of acquisition (the runtime's
    # table was full when their objects were first used there): they belong to
    # the family whose objects are acquired at that site, the busiest there
    # when several are; else, to the family initialized there; else to one of
    # their own.
    by_acquisition = {}
    for key, fam in fams.items():
        for site, c in fam.sites.items():
            best = by_acquisition.get((fam.kind, site))
            if best is None or c["acquisitions"] > best[0]:
                by_acquisition[(fam.kind, site)] = (c["acquisitions"], key)
    for rec in locks_rec.get("folded") or ():
        if not isinstance(rec, dict):
            continue
        kind = rec.get("kind") if isinstance(rec.get("kind"), str) else "unknown"
        site = rec.get("site") if isinstance(rec.get("site"), str) else None
        owner = by_acquisition.get((kind, site))
        key = owner[1] if owner else (kind, site)
        fam = fams.get(key)
        if fam is None:
            fam = fams[key] = _Family(kind, site)
        fam.add(rec, folded=True)
    return list(fams.values())


def _threads(rec):
    n = rec.get("threads")
    return n if type(n) is int and n > 0 else 1


def _member_summary(rec, c, elapsed_ns, th):
    fig = figures(c, elapsed_ns, _threads(rec))
    return {"id": rec.get("id"), "address": rec.get("address"),
            "acquisitions": fig["acquisitions"], "contended": fig["contended"],
            "contention": fig["contention"], "frequency": fig["frequency"],
            "wait_ns": fig["wait_ns"], "waiting_share": fig["waiting_share"],
            "mean_hold_ns": fig["mean_hold_ns"],
            "threads": rec.get("threads"), "quadrant": quadrant(fig, th)}


def _reportable_contended(fig, th):
    """A contended lock worth reporting: Q2, or Q1 with long critical sections.
    (A hot object's waits count even around a few instructions: one object
    that takes the traffic and the waits is what asymmetric contention is.)"""
    q = quadrant(fig, th, preempted_holders=False)
    return q == "Q2" or (q == "Q1" and fig["mean_hold_ns"] >= th["long_hold_ns"])


def asymmetry(members, elapsed_ns, th):
    """SyncPerf 2.1.4: objects of one family whose contention rates differ by
    `th["asymmetry"]` times or more. `members`: [(lock record, its counters)];
    objects with fewer than ASYMMETRY_MIN_ACQUISITIONS acquisitions are not
    compared. Rates are compared through Wilson intervals (99.9%), two ways:

    - "one-to-one" (SyncPerf's rule): the hottest object (highest lower
      bound) against the coolest (lowest upper bound);
    - "busiest-to-rest": the busiest object (most acquisitions) against all
      the others together (whatever their number of acquisitions), which has
      the power to see a hot bucket beside many cold ones that each have too
      few acquisitions to tell.

    and, as SyncPerf also checks "the number of acquisitions of these locks":

    - "traffic": the busiest object takes `th["asymmetry"]` times the
      acquisitions of every other (when threads took turns on the CPUs, the
      hot object's rate may be no higher, but it takes the waiting with its
      traffic).

    Contended acquisitions and acquisitions are counted events, robust where
    waiting times are not (one preempted holder makes one very long wait).
    Reported only when the hot object is itself a contended lock worth
    reporting (for "traffic": when the family is, and the busiest object is
    the one waited for most). Returns None or the figures."""
    used = [(rec, c) for rec, c in members if c["acquisitions"] > 0]
    compared = [(rec, c) for rec, c in used if c["acquisitions"] >= ASYMMETRY_MIN_ACQUISITIONS]
    if len(used) < 2 or not compared:
        return None
    found = (_one_to_one(compared, elapsed_ns, th) if len(compared) > 1 else None) or \
        _busiest_to_rest(compared, used, elapsed_ns, th) or _traffic(compared, used, elapsed_ns, th)
    if found is None:
        return None
    hot, rest, out = found
    hot_acq = sum(c["acquisitions"] for _r, c in hot)
    rest_acq = sum(c["acquisitions"] for _r, c in rest)
    out.update({
        "compared": len(compared) if out["measure"] == "one-to-one" else len(used),
        "hot_objects": len(hot),
        "hot_contention": sum(c["contended"] for _r, c in hot) / hot_acq if hot_acq else 0.0,
        "rest_contention": sum(c["contended"] for _r, c in rest) / rest_acq if rest_acq else 0.0,
        "hot_acquisition_share": hot_acq / (hot_acq + rest_acq) if hot_acq + rest_acq else 0.0,
        "acquisitions_range": [min(c["acquisitions"] for _r, c in used),
                               max(c["acquisitions"] for _r, c in used)],
    })
    return out


def _object(rec, c):
    acq = c["acquisitions"]
    return {"id": rec.get("id"), "address": rec.get("address"), "acquisitions": acq,
            "contention": c["contended"] / acq if acq else 0.0,
            "contention_ci": list(wilson(c["contended"], acq))}


def _hot_enough(rec, c, elapsed_ns, th):
    return _reportable_contended(figures(c, elapsed_ns, _threads(rec)), th)


def _one_to_one(compared, elapsed_ns, th):
    bounds = [(rec, c, *wilson(c["contended"], c["acquisitions"])) for rec, c in compared]
    hot = max(bounds, key=lambda t: (t[2], t[1]["contended"]))
    cold = min(bounds, key=lambda t: (t[3], -t[1]["acquisitions"]))
    bar = th["asymmetry"] * cold[3]
    if hot is cold or hot[2] < bar or not _hot_enough(hot[0], hot[1], elapsed_ns, th):
        return None
    hot_set = [(r, c) for r, c, lo, _hi in bounds if lo >= bar]
    rest = [(r, c) for r, c, lo, _hi in bounds if lo < bar]
    return hot_set, rest, {"measure": "one-to-one", "hottest": _object(hot[0], hot[1]),
                           "coolest": _object(cold[0], cold[1]),
                           "ratio": hot[2] / cold[3] if cold[3] > 0 else None}


def _busiest_to_rest(compared, used, elapsed_ns, th):
    busiest = max(compared, key=lambda m: (m[1]["acquisitions"], m[1]["contended"]))
    rest = [m for m in used if m[0] is not busiest[0]]
    lo, _hi = wilson(busiest[1]["contended"], busiest[1]["acquisitions"])
    _lo, rest_hi = wilson(sum(c["contended"] for _r, c in rest), sum(c["acquisitions"] for _r, c in rest))
    if lo < th["asymmetry"] * rest_hi or not _hot_enough(*busiest, elapsed_ns, th):
        return None
    coolest = min(rest, key=lambda m: (wilson(m[1]["contended"], m[1]["acquisitions"])[1],
                                       -m[1]["acquisitions"]))
    return [busiest], rest, {"measure": "busiest-to-rest", "hottest": _object(*busiest),
                             "coolest": _object(*coolest), "ratio": lo / rest_hi if rest_hi > 0 else None}


def _traffic(compared, used, elapsed_ns, th):
    busiest = max(compared, key=lambda m: (m[1]["acquisitions"], m[1]["contended"]))
    rest = [m for m in used if m[0] is not busiest[0]]
    second = max(c["acquisitions"] for _r, c in rest)
    if busiest[1]["acquisitions"] < th["asymmetry"] * second:
        return None
    # The family is contended, and the busiest object is the one waited for most.
    if busiest[1]["wait_ns"] < max(c["wait_ns"] for _r, c in rest):
        return None
    total = dict.fromkeys(_COUNTERS, 0)
    for _r, c in used:
        _add(total, c)
    if not _reportable_contended(figures(total, elapsed_ns, max(_threads(r) for r, _c in used)), th):
        return None
    coolest = min(rest, key=lambda m: (m[1]["contended"] / m[1]["acquisitions"], -m[1]["acquisitions"]))
    return [busiest], rest, {"measure": "traffic", "hottest": _object(*busiest), "coolest": _object(*coolest),
                             "ratio": busiest[1]["acquisitions"] / second}


# -- classification ----------------------------------------------------------

SUGGESTIONS = {
    ("improper-granularity", "Q2"): "split the lock (striped locks, a lock per bucket or item) "
                                    "or move work out of its critical sections",
    ("improper-granularity", "Q1"): "shrink the critical sections: move the work that does not "
                                    "touch shared data out of the lock",
    ("improper-granularity", "Q4"): "take the lock less often: merge neighbouring critical "
                                    "sections under one acquisition (coarser locking)",
    ("asymmetric-contention", None): "spread the contention: a better hash or more buckets, so "
                                     "that no object takes most of the traffic",
    ("over-synchronization", None): "remove the lock: each object was only ever taken by one thread",
    ("improper-primitive", "Q4"): "use an atomic instruction (or a spin lock) for so short a "
                                  "critical section",
    ("improper-primitive", "trylock"): "block instead of retrying: wait on a condition "
                                       "variable (or a barrier) rather than polling with try-lock",
}


def classify(entry, th):
    """The finding of one lock entry (its `quadrant`, `single_thread` and
    `asymmetry` set), or None: (category, basis, reason, suggestion)."""
    if entry["kind"] not in LOCK_KINDS:
        return None
    q = entry["quadrant"]
    fig = entry["figures"]
    if entry["asymmetry"] is not None:
        a = entry["asymmetry"]
        one = a["hot_objects"] == 1
        if a["measure"] == "traffic":
            reason = (f"the busiest of {a['compared']} objects takes {a['hot_acquisition_share']:.0%} "
                      f"of the acquisitions ({a['ratio']:.0f} times the next) and is the one "
                      f"threads wait for")
        else:
            reason = (f"{a['hot_objects']} of {a['compared']} objects {'takes' if one else 'take'} "
                      f"{a['hot_acquisition_share']:.0%} of the acquisitions and "
                      f"{'is' if one else 'are'} contended {a['hot_contention']:.2%} against "
                      f"{a['rest_contention']:.2%} for the others")
        return "asymmetric-contention", "asymmetry", reason, SUGGESTIONS[("asymmetric-contention", None)]
    if q in ("Q2", "Q4") and entry["single_thread"]:
        return ("over-synchronization", "single-thread", "frequent, and every object was used by a single thread",
                SUGGESTIONS[("over-synchronization", None)])
    if q == "Q2":
        return ("improper-granularity", "quadrant", "frequent and contended (too much data or work under "
                "one lock, or a lock around work that needs none)",
                SUGGESTIONS[("improper-granularity", "Q2")])
    if q == "Q1":
        if fig["mean_hold_ns"] >= th["long_hold_ns"]:
            return ("improper-granularity", "quadrant", "rare but contended, with long critical sections",
                    SUGGESTIONS[("improper-granularity", "Q1")])
        return None
    if q == "Q4":
        if short_sections(fig, th):
            reason = "frequent, uncontended, critical sections of a few instructions: the acquisitions are the cost"
            if fig["mean_hold_ns"] >= th["short_hold_ns"]:
                reason += (f" (the mean hold, {fig['mean_hold_ns']:.0f} ns, is "
                           f"{fig['mean_hold_trimmed_ns']:.0f} ns with the weightiest sampled hold of each "
                           "thread's count taken once: a hold timed across a preemption of its holder)")
            return ("improper-primitive", "quadrant", reason, SUGGESTIONS[("improper-primitive", "Q4")])
        return ("improper-granularity", "quadrant", "frequent and uncontended: the acquisitions are the cost",
                SUGGESTIONS[("improper-granularity", "Q4")])
    return None


def classify_trylock(fig, th):
    """SyncPerf 2.1.1: extensive try-lock failures (frequent try-lock calls that
    fail at the contention threshold or more)."""
    if fig["trylocks"] and fig["trylock_frequency"] >= th["frequency"] and \
            fig["trylock_failure_rate"] >= th["contention"]:
        return ("improper-primitive", "trylock", "frequent try-lock calls that fail",
                SUGGESTIONS[("improper-primitive", "trylock")])
    return None


# -- critical sections from the source ----------------------------------------

_UNLOCK_RE = re.compile(r"\b(?:\w*unlock\w*|sem_post|[A-Za-z_]*release)\s*\(")
_LOCK_RE = re.compile(r"\b\w*lock\w*\s*\(")
_BRACE_OR_UNLOCK_RE = re.compile(r"[{}]|" + _UNLOCK_RE.pattern)


def _code_only(text, state):
    """`text` with comments and string literals blanked; `state` carries an open
    /* comment across lines (a one-element list)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if state[0]:
            end = text.find("*/", i)
            if end < 0:
                return "".join(out)
            state[0] = False
            i = end + 2
            continue
        ch = text[i]
        if text.startswith("//", i):
            break
        if text.startswith("/*", i):
            state[0] = True
            i += 2
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) - i + 1))
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def critical_section(source_lines, lineno):
    """Lines of the critical section that starts with the lock call on line
    `lineno` (1-based) of `source_lines`: (first, last) where `last` is the line
    of the matching release, or None when the line is not in the source.

    The release is the first later call whose name contains "unlock" (or
    sem_post, *release) at the brace depth of the acquisition; releases inside
    blocks opened after it (early exits) are passed over. When the enclosing
    block closes first, the section ends there. When the acquisition line
    itself releases after the lock call, the section is that one line."""
    if not 1 <= lineno <= len(source_lines):
        return None
    state = [False]
    first = _code_only(source_lines[lineno - 1], state)
    lock = None
    for m in _LOCK_RE.finditer(first):
        if "unlock" not in m.group(0):
            lock = m
    if lock is not None and _UNLOCK_RE.search(first, lock.end()):
        return lineno, lineno
    depth = 0
    for i in range(lineno, min(len(source_lines), lineno + SOURCE_SCAN_LINES)):
        code = _code_only(source_lines[i], state)
        for m in _BRACE_OR_UNLOCK_RE.finditer(code):
            tok = m.group(0)
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth < 0:
                    return lineno, i + 1
            elif depth == 0:
                return lineno, i + 1
    return lineno, min(len(source_lines), lineno + SOURCE_SCAN_LINES)


class SourceReader:
    """Reads source files once each; None for a file that cannot be read."""

    def __init__(self):
        self.cache = {}

    def __call__(self, path):
        if path not in self.cache:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    self.cache[path] = f.read().splitlines()
            except OSError:
                self.cache[path] = None
        return self.cache[path]


def _split_line(name):
    path, sep, tail = name.rpartition(":")
    if not sep or not tail.isdigit():
        return None, None
    return path, int(tail)


# -- the causal join -----------------------------------------------------------

def causal_index(analysis):
    """line -> its best entry of a causal analysis (highest impact among the
    progress points), or {} without an analysis."""
    best = {}
    for ln in (analysis or {}).get("lines") or ():
        cur = best.get(ln["line"])
        if cur is None or ln["impact"] > cur["impact"]:
            best[ln["line"]] = ln
    return best


def _causal_entry(line, role, ln):
    return {"line": line, "role": role, "progress_point": ln["progress_point"],
            "impact": ln["impact"], "predicted": dict(ln["predicted"]),
            "slope_ci": list(ln["slope_ci"]), "experiments": ln["experiments"]}


def join_critical_sections(family, index, read_source):
    """For the busiest acquisition sites of a family: the lines of their
    critical sections and the causal predictions measured for them."""
    out = []
    sites = sorted(family.sites.items(), key=lambda kv: (-kv[1]["acquisitions"], kv[0]))
    for site, c in sites[:TOP_SITES]:
        entry = {"site": site, "acquisitions": c["acquisitions"], "contended": c["contended"],
                 "wait_ns": c["wait_ns"], "hold_ns": c["hold_ns"],
                 "method": None, "lines": [], "release": None, "causal": []}
        roles = {}
        if c.get("held"):
            entry["method"] = "held-samples"
            held = sorted(c["held"].items(), key=lambda kv: (-kv[1], kv[0]))
            entry["lines"] = [ln for ln, _ in held]
            roles = {ln: "inside" for ln in entry["lines"]}
            roles.setdefault(site, "acquire")
        else:
            path, lineno = _split_line(site)
            text = read_source(path) if path else None
            span = critical_section(text, lineno) if text is not None else None
            if span is None:
                entry["method"] = "unknown"
                roles = {site: "acquire"}
            else:
                entry["method"] = "source"
                first, last = span
                entry["lines"] = [f"{path}:{n}" for n in range(first, last + 1)]
                entry["release"] = f"{path}:{last}" if last != first else None
                for n in range(first, last + 1):
                    roles[f"{path}:{n}"] = "inside"
                roles[site] = "acquire"
                if last != first:
                    roles[f"{path}:{last}"] = "release"
        joined = [_causal_entry(line, role, index[line]) for line, role in roles.items()
                  if line in index]
        joined.sort(key=lambda e: (-e["impact"], e["line"]))
        entry["causal"] = joined
        out.append(entry)
    return out


def _best_causal(sections):
    best = None
    for s in sections:
        for e in s["causal"]:
            if best is None or e["impact"] > best["impact"]:
                best = e
    return best


# -- load imbalance ---------------------------------------------------------------

def thread_groups(threads):
    """Per thread group (the function threads were started with): threads,
    lifetime, CPU, waits, the profiler's pauses, and SyncPerf's computing time
    (lifetime minus the time spent waiting for other threads, locks and
    synchronization, and minus the profiler's pauses)."""
    groups = {}
    for t in threads:
        name = t.get("group") if isinstance(t.get("group"), str) else "?"
        g = groups.get(name)
        if g is None:
            g = groups[name] = {"group": name, "threads": 0, "lifetime_ns": 0, "cpu_ns": 0,
                                "wait_ns": {}, "sync_wait_ns": 0, "paused_ns": 0, "computing_ns": 0}
        start, end = _nonneg(t.get("start_ns", 0)), _nonneg(t.get("end_ns", 0))
        life = max(0, end - start)
        waits = t.get("wait_ns") if isinstance(t.get("wait_ns"), dict) else {}
        sync = min(life, sum(_nonneg(waits.get(k, 0)) for k in SYNC_WAITS))
        # The profiler's pauses (virtual speedup's delays, in a causal run) are
        # not the group's work: a group that paid more of them would read as
        # computing longer.
        paused = min(life - sync, _nonneg(t.get("paused_ns", 0)))
        g["threads"] += 1
        g["lifetime_ns"] += life
        g["cpu_ns"] += _nonneg(t.get("cpu_ns", 0))
        for k, v in waits.items():
            g["wait_ns"][k] = g["wait_ns"].get(k, 0) + _nonneg(v)
        g["sync_wait_ns"] += sync
        g["paused_ns"] += paused
        g["computing_ns"] += life - sync - paused
    for g in groups.values():
        life = g["lifetime_ns"]
        g["waiting_share"] = g["sync_wait_ns"] / life if life else 0.0
        g["mean_computing_ns"] = g["computing_ns"] / g["threads"]
        g["mean_waiting_ns"] = g["sync_wait_ns"] / g["threads"]
    return sorted(groups.values(), key=lambda g: g["group"])


def suggest_assignment(groups):
    """SyncPerf 2.1.5: the threads of the compared groups, shared out in
    proportion to each group's computing time. Returns (fractional shares,
    whole numbers): the whole numbers keep the total, give every group at
    least one thread, and round by largest remainder."""
    total = sum(g["threads"] for g in groups)
    work = sum(g["computing_ns"] for g in groups)
    if not groups or total < len(groups) or work <= 0:
        return None, None
    exact = [total * g["computing_ns"] / work for g in groups]
    whole = [max(1, int(math.floor(x))) for x in exact]
    while sum(whole) > total:
        # Taking from the group that is furthest above its share (never below 1).
        i = max((i for i in range(len(whole)) if whole[i] > 1), key=lambda i: whole[i] - exact[i])
        whole[i] -= 1
    while sum(whole) < total:
        i = max(range(len(whole)), key=lambda i: (exact[i] - whole[i], -i))
        whole[i] += 1
    return exact, whole


def load_imbalance(threads, th):
    """Thread groups, and whether their waiting differs by more than
    `th["imbalance"]` of their lifetime (the main thread left out)."""
    groups = thread_groups(threads)
    compared = [g for g in groups if g["group"] != MAIN_GROUP and g["lifetime_ns"] > 0]
    result = {"groups": groups, "compared": [g["group"] for g in compared], "imbalanced": False,
              "spread": None, "slowest": None, "suggested": None}
    if len(compared) < 2:
        return result
    shares = [g["waiting_share"] for g in compared]
    result["spread"] = max(shares) - min(shares)
    slowest = min(compared, key=lambda g: (g["waiting_share"], -g["mean_computing_ns"], g["group"]))
    result["slowest"] = slowest["group"]
    exact, whole = suggest_assignment(compared)
    if exact is not None:
        result["suggested"] = [{"group": g["group"], "threads": g["threads"], "share": x,
                                "suggested": w} for g, x, w in zip(compared, exact, whole)]
    result["imbalanced"] = result["spread"] > th["imbalance"]
    return result


def hottest_line(profile, group, run=None):
    """The line where the threads of `group` spent the most time not waiting for
    other threads, from the conventional profile's stacks of `run`, or of every
    run of the profile when `run` has none of that group: (line, time_ns), or
    (None, 0) when there are no stacks of that group."""
    if run is not None:
        line, ns = hottest_line(_Only(profile, run), group)
        if line is not None:
            return line, ns
    known = set()
    for r in profile.runs:
        known.update(r.samples)
        for per_line in r.blocked.values():
            known.update(per_line)
        known.update(e.selected for e in r.experiments)
    per_line = {}
    for r in profile.runs:
        argv0 = r.startup.get("argv0")
        for sid, (_n, ns) in r.stack_counts.items():
            st = r.stacks.get(sid)
            # (A lock or sync call's time on the CPU, a "cpu" stack under
            # coz_kernel_in_lock or _sync, is waiting for other threads too.)
            if st is None or st.group != group or st.kind in SYNC_WAITS or \
                    profile_mod.kernel_call_kind(r, st) in SYNC_WAITS:
                continue
            line = _first_in_scope(r, st, known, argv0)
            if line is not None:
                per_line[line] = per_line.get(line, 0) + ns
    if not per_line:
        return None, 0
    line = max(per_line, key=lambda k: (per_line[k], k))
    return line, per_line[line]


class _Only:
    """A profile reduced to one of its runs (for hottest_line)."""

    def __init__(self, profile, run):
        self.runs = [run]


def _first_in_scope(run, stack, known, argv0):
    fallback = None
    for lid in stack.locations:
        loc = run.locations.get(lid)
        if loc is None:
            continue
        for _fn, f, n in loc.lines:
            if f is None or not n:
                continue
            name = f"{f}:{n}"
            if name in known:
                return name
            if fallback is None and loc.object == argv0:
                fallback = name
    return fallback


# -- the whole analysis ---------------------------------------------------------

def thresholds(frequency=FREQUENCY, contention=CONTENTION, long_hold_ns=LONG_HOLD_NS,
               short_hold_ns=SHORT_HOLD_NS, asymmetry=ASYMMETRY, imbalance=IMBALANCE):
    for name, v in (("frequency", frequency), ("long_hold_ns", long_hold_ns),
                    ("short_hold_ns", short_hold_ns)):
        if not (v > 0 and math.isfinite(v)):
            raise CozError(f"the {name} threshold must be positive and finite, not {v}")
    for name, v in (("contention", contention), ("imbalance", imbalance)):
        if not 0 < v < 1:
            raise CozError(f"the {name} threshold must be between 0 and 100%, not {v:.0%}")
    if not (asymmetry > 1 and math.isfinite(asymmetry)):
        raise CozError(f"the asymmetry ratio must be finite and above 1, not {asymmetry}")
    return {"frequency": float(frequency), "contention": float(contention),
            "long_hold_ns": int(long_hold_ns), "short_hold_ns": int(short_hold_ns),
            "asymmetry": float(asymmetry), "imbalance": float(imbalance)}


# Findings are ranked by what their cost is measured in. Contended locks (by
# time waited) and load imbalance cost time spent waiting, which the counters
# measure; try-lock failures (by failures) and uncontended locks (by
# acquisitions) cost per call, which they do not.
_ORDER = {"contended": 0, "imbalance": 1, "trylock": 2, "uncontended": 3}


def analyze_locks(profile, pid=None, th=None, causal=None, causal_note=None, read_source=None):
    """The docs/locks.md object for one run of `profile` (see `choose_run`).

    `th`: from `thresholds()`; `causal`: a causal analysis of the profile
    (`analysis.analyze`) to join with, or None; `causal_note`: why there is
    none; `read_source`: path -> list of lines or None (default: read the file)."""
    th = th or thresholds()
    read_source = read_source or SourceReader()
    run, others = choose_run(profile, pid)
    locks_rec = run.locks or {}
    elapsed_ns = _nonneg(locks_rec.get("elapsed_ns", 0))
    warnings = list(profile.warnings)
    if run.locks is None:
        warnings.append("the run has thread records but no lock counters")
    elif elapsed_ns <= 0:
        warnings.append("the lock counters cover no time (elapsed_ns is 0): frequencies are 0")
    if not run.quiet:
        warnings.append("the counters come from a run with experiments: hold and wait times "
                        "include the delays inserted while locks were held (run with "
                        "--locks-only for undisturbed figures)")
    index = causal_index(causal)

    entries, findings, others_sync, joins = [], [], [], []
    for fam in _families(locks_rec):
        fig = figures(fam.total, elapsed_ns, fam.threads)
        entry = {
            "key": f"{fam.kind}@{fam.site}" if fam.site else
                   f"{fam.kind}#{fam.members[0][0].get('id') if fam.members else '?'}",
            "kind": fam.kind, "site": fam.site, "objects": fam.objects,
            "folded_objects": sum(_nonneg(r.get("objects", 0)) for r in fam.folded),
            "address": fam.members[0][0].get("address") if fam.objects == 1 and not fam.folded else None,
            "figures": fig, "threads": fam.threads, "single_thread": fam.single_thread and fam.objects > 0,
            "quadrant": quadrant(fig, th), "asymmetry": None, "members_by_quadrant": {},
            "top_members": [], "sites": [], "category": None, "reason": None, "suggestion": None,
            "trylock": None, "critical_sections": [], "best_causal": None,
        }
        if fam.kind not in LOCK_KINDS:
            entry["quadrant"] = None
        if len(fam.members) > 1 and fam.kind not in JOIN_KINDS:
            # Up to a million objects: count quadrants, and keep a summary of the top few only.
            by_q = entry["members_by_quadrant"]
            elapsed_s = elapsed_ns / 1e9
            for rec, c in fam.members:
                acq = c["acquisitions"]
                q = quadrant({"frequency": acq / elapsed_s if elapsed_s > 0 else 0.0,
                              "contention": c["contended"] / acq if acq else 0.0,
                              "waiting_share": c["wait_ns"] / (_threads(rec) * elapsed_ns)
                              if elapsed_ns > 0 else 0.0}, th)
                by_q[q] = by_q.get(q, 0) + 1
            top = heapq.nsmallest(TOP_MEMBERS, fam.members,
                                  key=lambda m: (-m[1]["contended"], -m[1]["acquisitions"],
                                                 str(m[0].get("id"))))
            entry["top_members"] = [_member_summary(r, c, elapsed_ns, th) for r, c in top]
            if fam.kind in LOCK_KINDS:
                entry["asymmetry"] = asymmetry(fam.members, elapsed_ns, th)
                if entry["asymmetry"] is not None and entry["quadrant"] is not None:
                    # Its hot objects' waits are the finding, whatever the holds.
                    entry["quadrant"] = quadrant(fig, th, preempted_holders=False)
        entry["sites"] = [dict({"site": s}, **{k: v for k, v in c.items() if k != "held"})
                          for s, c in sorted(fam.sites.items(), key=lambda kv: (-kv[1]["acquisitions"], kv[0]))]
        found = classify(entry, th)
        tried = classify_trylock(fig, th) if fam.kind in LOCK_KINDS else None
        if found or tried:
            entry["critical_sections"] = join_critical_sections(fam, index, read_source)
            entry["best_causal"] = _best_causal(entry["critical_sections"])
        if found:
            entry["category"], basis, entry["reason"], entry["suggestion"] = found
            contended = entry["quadrant"] in ("Q1", "Q2") or entry["asymmetry"] is not None
            findings.append(_finding(entry, *found, "contended" if contended else "uncontended"))
        if tried:
            entry["trylock"] = {"category": tried[0], "reason": tried[2], "suggestion": tried[3]}
            findings.append(_finding(entry, *tried, "trylock"))
        (entries if fam.kind in LOCK_KINDS else joins if fam.kind in JOIN_KINDS else others_sync).append(entry)

    imbalance = load_imbalance(run.threads, th)
    imbalance["hottest_line"] = None
    imbalance["hottest_line_ns"] = 0
    imbalance["causal"] = None
    if imbalance["slowest"] is not None:
        line, ns = hottest_line(profile, imbalance["slowest"], run)
        imbalance["hottest_line"], imbalance["hottest_line_ns"] = line, ns
        if line is not None and line in index:
            imbalance["causal"] = _causal_entry(line, "hottest", index[line])
    if imbalance["imbalanced"]:
        shares = {g["group"]: g["waiting_share"] for g in imbalance["groups"]}
        most = max(imbalance["compared"], key=lambda n: (shares[n], n))
        findings.append({
            "category": "load-imbalance", "basis": "waiting", "lock": None, "quadrant": None,
            "reason": f"thread group {most} waits {shares[most]:.0%} of its lifetime, "
                      f"{imbalance['slowest']} {shares[imbalance['slowest']]:.0%}",
            "suggestion": "give each group threads in proportion to its computing time: " +
                          ", ".join(f"{s['group']} {s['suggested']}" for s in imbalance["suggested"] or ()),
            "best_causal": imbalance["causal"], "_rank": (_ORDER["imbalance"], (), ""),
        })

    findings.sort(key=lambda f: f["_rank"])
    for i, f in enumerate(findings, 1):
        del f["_rank"]
        f["rank"] = i
    entries.sort(key=lambda e: (-e["figures"]["wait_ns"], -e["figures"]["acquisitions"], e["key"]))
    others_sync.sort(key=lambda e: (-e["figures"]["wait_ns"], e["key"]))
    joins.sort(key=lambda e: (-e["figures"]["wait_ns"], -e["figures"]["acquisitions"], e["key"]))

    causal_info = {"available": causal is not None and bool(index),
                   "lines": len(index), "note": causal_note}
    if causal is not None and not index and causal_note is None:
        causal_info["note"] = "the causal analysis has no line with a curve" + \
            (f": {causal['diagnosis']}" if causal.get("diagnosis") else "")

    diagnosis = None
    if not findings:
        n = len(entries)
        diagnosis = (f"none of the {n} lock{'s' if n != 1 else ''} is frequent "
                     f"(>= {th['frequency']:g}/s) or contended (>= {th['contention']:.0%}) enough "
                     "to report, and the thread groups wait alike" if n else
                     # No locks record: not a program without locks, a run without counters.
                     "the run kept no lock counters (coz run --no-lock-counters), so its locks "
                     "are not known; its thread groups wait alike" if run.locks is None else
                     "the program took no lock, and its thread groups wait alike")
    return {
        "schema": SCHEMA,
        "profiles": list(profile.paths),
        "run": _describe_run(run),
        "other_runs": [_describe_run(r) for r in others],
        "thresholds": th,
        "findings": findings,
        "locks": entries,
        "other_synchronization": others_sync,
        "load_imbalance": imbalance,
        "joins": joins,
        "causal": causal_info,
        "warnings": warnings,
        "diagnosis": diagnosis,
    }


def _finding(entry, category, basis, reason, suggestion, order):
    """A finding about a lock entry; `order` is "contended", "trylock" or
    "uncontended" (see _rank)."""
    fig = entry["figures"]
    if order == "uncontended":
        measure = (-fig["acquisitions"], -fig["wait_ns"])
    elif order == "trylock":
        measure = (-fig["trylock_failures"], -fig["wait_ns"])
    else:
        measure = (-fig["wait_ns"], -fig["acquisitions"])
    return {"category": category, "basis": basis, "lock": entry["key"],
            "quadrant": entry["quadrant"], "reason": reason, "suggestion": suggestion, "best_causal": entry["best_causal"],
            "_rank": (_ORDER[order], measure, entry["key"])}
