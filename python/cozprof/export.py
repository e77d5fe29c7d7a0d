"""`coz export`: the conventional profile in the formats other tools read.

* `--pprof FILE`: pprof's gzipped protobuf (`profile.proto` of
  github.com/google/pprof), written by the small encoder below: one pprof
  sample per distinct stack, with values `samples/count` and
  `cpu/nanoseconds` (`wall/nanoseconds` when waits are exported), mappings
  with build-ids, locations with their lines (inlined functions first),
  functions, and the labels `thread`, `tid`, `group`, `kind` and `pid`.
* `--folded FILE`: Brendan Gregg's folded stacks (`flamegraph.pl`,
  inferno, speedscope): `root;caller;callee COUNT`, one line per distinct
  stack, optionally behind `kind:`, `group:` and `thread:` frames.
* `--speedscope FILE`: speedscope's JSON file format: one sampled profile
  per thread, frames shared.

Every exporter reads the stacks through `conventional` (frames of inlined
functions included) and the kinds `--kind` selects (CPU by default).
"""

import gzip
import json
import os
import sys

from . import conventional as conv, output
from .errors import CozError

PREFIXES = ("kind", "group", "thread")
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def add_arguments(p):
    p.add_argument("profiles", nargs="*", metavar="PROFILE",
                   help="profile files to merge (default profile.coz)")
    p.add_argument("--pprof", metavar="FILE", help="write pprof's gzipped protobuf (.pb.gz)")
    p.add_argument("--folded", metavar="FILE",
                   help="write folded stacks for FlameGraph ('-': standard output)")
    p.add_argument("--speedscope", metavar="FILE", help="write speedscope's JSON")
    p.add_argument("--kind", default="cpu", metavar="KINDS",
                   help="samples exported: cpu (default), off (every wait), all, or a list of "
                        "cpu,io,lock,sleep,sync,sched,other")
    p.add_argument("--value", choices=("samples", "time"), default=None,
                   help="folded counts and speedscope weights: sample counts or nanoseconds "
                        "(defaults: samples for --folded, time for --speedscope)")
    p.add_argument("--folded-prefix", metavar="LIST", default="",
                   help="frames put before each folded stack, root first: a comma-separated "
                        "list of kind, group, thread")
    p.add_argument("--all-runs", action="store_true",
                   help="export every run of each profile, not only those of its latest build")


def run(args):
    if not (args.pprof or args.folded or args.speedscope):
        raise CozError("nothing to export",
                       hint="name at least one of --pprof FILE, --folded FILE, --speedscope FILE")
    if args.folded_prefix and not args.folded:
        raise CozError("--folded-prefix applies to --folded", hint="add --folded FILE, or drop --folded-prefix")
    if args.value is not None and not (args.folded or args.speedscope):
        raise CozError("--value applies to --folded and --speedscope",
                       hint="drop --value: pprof's profile carries both sample counts and time")
    kinds = conv.parse_kinds(args.kind)
    prefixes = parse_prefixes(args.folded_prefix)
    outs = [f for f in (args.pprof, args.folded, args.speedscope) if f and f != "-"]
    for f in outs:
        if _looks_like_profile(f):
            raise CozError(f"{f} looks like a profile: exporting would overwrite it",
                           hint="name the profiles first and the output files after the options, "
                                "e.g. coz export profile.coz --pprof out.pb.gz")
    if len(set(outs)) < len(outs):
        raise CozError("two exports name the same file", hint="give each format its own file")
    if args.speedscope == "-" or args.pprof == "-":
        raise CozError("only --folded can write to standard output",
                       hint="name a file for --pprof and --speedscope")
    from .report import DEFAULT_PROFILE
    from . import profile as profile_mod

    prof = profile_mod.load(args.profiles or [DEFAULT_PROFILE])
    if not args.all_runs:
        prof = prof.latest_builds()
        if prof.build_note:
            print(f"coz: warning: {prof.build_note}", file=sys.stderr)
    for w in prof.warnings:
        print(f"coz: warning: {w}", file=sys.stderr)
    conv.require_stacks(prof)
    present = {k for k, (n, _ns) in conv.kind_totals(prof).items() if n}
    if not present & kinds:
        # An empty file would be written and called written; FlameGraph refuses
        # an empty folded file, speedscope says the profile is empty.
        raise CozError(f"no samples of the kinds asked ({','.join(sorted(kinds))}) to export",
                       hint=f"the profile holds {','.join(sorted(present)) or 'no samples'}: "
                            "choose them with --kind (e.g. --kind all)" if present else
                            "the run took no samples (a --locks-only run samples nothing)")
    if args.pprof:
        _write(args.pprof, pprof_bytes(prof, kinds), binary=True)
    if args.folded:
        _write(args.folded, folded_text(prof, kinds, value=args.value or "samples",
                                        prefixes=prefixes))
    if args.speedscope:
        data = speedscope(prof, kinds, value=args.value or "time")
        _write(args.speedscope, json.dumps(data, separators=(",", ":")) + "\n")
    return 0


def parse_prefixes(text):
    out = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        if word not in PREFIXES:
            raise CozError(f"unknown --folded-prefix {word!r}",
                           hint="choose among kind, group, thread (comma-separated)")
        if word not in out:
            out.append(word)
    return out


def _looks_like_profile(path):
    from .report import _looks_like_profile as looks

    return looks(path)


def _write(path, data, binary=False):
    """Write an export to `path` ('-': standard output); text as UTF-8, as
    FlameGraph, inferno and speedscope read it, whatever the locale."""
    if path == "-":
        output.write_data(data)
        return
    if not binary:
        data = output.utf8(data)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise CozError(f"cannot write {path}: {e.strerror}",
                       hint="choose a writable path") from None
    print(f"coz: wrote {path}", file=sys.stderr)


# -- folded stacks ----------------------------------------------------------------

def _folded_name(name):
    """Frame names may hold anything but the separator and line ends."""
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ")


def folded_lines(profile, kinds=conv.DEFAULT_KINDS, value="samples", prefixes=()):
    """{"frame;frame;frame": count} (root first), identical stacks merged."""
    merged = {}
    for names, st, _run, n, ns in conv.folded_stacks(profile, kinds):
        head = []
        for p in prefixes:
            if p == "kind":
                head.append(f"kind:{st.kind}")
            elif p == "group":
                head.append(f"group:{st.group}")
            else:
                head.append(f"thread:{st.thread}/{st.tid}")
        key = ";".join(_folded_name(x) for x in head + (names or [conv.UNKNOWN]))
        merged[key] = merged.get(key, 0) + (n if value == "samples" else ns)
    return merged


def folded_text(profile, kinds=conv.DEFAULT_KINDS, value="samples", prefixes=()):
    lines = folded_lines(profile, kinds, value, prefixes)
    return "".join(f"{k} {v}\n" for k, v in sorted(lines.items()) if v > 0)


# -- speedscope ---------------------------------------------------------------------

def speedscope(profile, kinds=conv.DEFAULT_KINDS, value="time"):
    """speedscope's file format: one sampled profile per thread of each run."""
    frames, index = [], {}

    def frame(name, file):
        key = (name, file)
        i = index.get(key)
        if i is None:
            i = index[key] = len(frames)
            f = {"name": name}
            if file:
                f["file"] = file
            frames.append(f)
        return i

    with_waits = any(k != conv.CPU for k in kinds)
    threads = {}   # (run index, tid) -> {"name", stacks: {tuple: weight}}
    for ri, run in enumerate(profile.runs):
        rs = conv.RunStacks(run)
        for st, n, ns in rs.counted(kinds):
            w = n if value == "samples" else ns
            if w <= 0:
                continue
            path = [frame(fr.name, fr.file) for fr in reversed(rs.frames(st))]
            if with_waits and st.kind != conv.CPU:
                path.append(frame(f"[wait: {st.kind}]", None))
            t = threads.get((ri, st.tid))
            if t is None:
                t = threads[(ri, st.tid)] = {"run": run, "thread": st.thread, "group": st.group,
                                             "tid": st.tid, "stacks": {}}
            key = tuple(path)
            t["stacks"][key] = t["stacks"].get(key, 0) + w
    several = len(profile.runs) > 1
    profiles = []
    for (ri, tid), t in sorted(threads.items(), key=lambda kv: kv[0]):
        stacks = sorted(t["stacks"].items())
        total = sum(w for _, w in stacks)
        name = f"{t['thread'] or '?'} (tid {tid}, group {t['group'] or '?'})"
        if several:
            name += f" [pid {t['run'].startup.get('pid', '?')}]"
        profiles.append({
            "type": "sampled", "name": name,
            "unit": "nanoseconds" if value == "time" else "none",
            "startValue": 0, "endValue": total,
            "samples": [list(s) for s, _ in stacks], "weights": [w for _, w in stacks],
        })
    active = max(range(len(profiles)), key=lambda i: profiles[i]["endValue"]) if profiles else 0
    from . import __version__

    argv0 = profile.runs[0].startup.get("argv0") if profile.runs else None
    return {"$schema": SPEEDSCOPE_SCHEMA, "shared": {"frames": frames}, "profiles": profiles,
            "name": (os.path.basename(argv0) if isinstance(argv0, str) and argv0 else "coz profile")
            + f" ({conv.describe_kinds(kinds)})",
            "activeProfileIndex": active, "exporter": f"coz {__version__}"}


# -- pprof's protobuf -------------------------------------------------------------------
#
# Field numbers of perftools.profiles (proto/profile.proto in github.com/google/pprof):
# Profile: sample_type 1, sample 2, mapping 3, location 4, function 5, string_table 6,
#   time_nanos 9, duration_nanos 10, period_type 11, period 12, comment 13,
#   default_sample_type 14.
# ValueType: type 1, unit 2.  Sample: location_id 1 (packed), value 2 (packed), label 3.
# Label: key 1, str 2, num 3, num_unit 4.
# Mapping: id 1, memory_start 2, memory_limit 3, file_offset 4, filename 5, build_id 6,
#   has_functions 7, has_filenames 8, has_line_numbers 9, has_inline_frames 10.
# Location: id 1, mapping_id 2, address 3, line 4.  Line: function_id 1, line 2.
# Function: id 1, name 2, system_name 3, filename 4, start_line 5.

_VARINT, _LEN = 0, 2


def _varint(out, v):
    if v < 0:
        v += 1 << 64      # int64 as two's complement, ten bytes
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _field_int(out, field, v):
    """A varint field; zero is the default and is left out, as proto3 does."""
    if v:
        _varint(out, field << 3 | _VARINT)
        _varint(out, v)


def _field_bytes(out, field, data):
    _varint(out, field << 3 | _LEN)
    _varint(out, len(data))
    out += data


def _field_packed(out, field, values):
    if not values:
        return
    body = bytearray()
    for v in values:
        _varint(body, v)
    _field_bytes(out, field, body)


class _Strings:
    def __init__(self):
        self.table = [""]
        self.index = {"": 0}

    def __call__(self, s):
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def _value_type(strings, type_, unit):
    out = bytearray()
    _field_int(out, 1, strings(type_))
    _field_int(out, 2, strings(unit))
    return out


def pprof_message(profile, kinds=conv.DEFAULT_KINDS):
    """The Profile message (not compressed)."""
    s = _Strings()
    out = bytearray()
    time_type = "cpu" if kinds == conv.DEFAULT_KINDS else "wall"
    _field_bytes(out, 1, _value_type(s, "samples", "count"))
    _field_bytes(out, 1, _value_type(s, time_type, "nanoseconds"))

    functions = {}     # (name, file) -> id
    function_msgs = []
    mappings = {}      # (run index, object) -> [id, start, limit, offset, build_id, has_lines, inline]
    locations = {}     # (run index, location id) -> global id
    location_msgs = []
    keys = {k: s(k) for k in ("thread", "tid", "group", "kind", "pid")}

    def function_id(name, file):
        key = (name, file)
        fid = functions.get(key)
        if fid is None:
            fid = functions[key] = len(functions) + 1
            m = bytearray()
            _field_int(m, 1, fid)
            _field_int(m, 2, s(name))
            _field_int(m, 3, s(name))
            if file:
                _field_int(m, 4, s(file))
            function_msgs.append(m)
        return fid

    def location_id(ri, run, lid):
        key = (ri, lid)
        gid = locations.get(key)
        if gid is not None:
            return gid
        gid = locations[key] = len(locations) + 1
        loc = run.locations.get(lid)
        m = bytearray()
        _field_int(m, 1, gid)
        if loc is None:
            line = bytearray()
            _field_int(line, 1, function_id(conv.UNKNOWN, None))
            _field_bytes(m, 4, line)
            location_msgs.append(m)
            return gid
        mk = (ri, loc.object)
        mp = mappings.get(mk)
        if mp is None:
            mp = mappings[mk] = [len(mappings) + 1, loc.address, loc.address + 1,
                                 loc.object_offset, loc.build_id, False, False]
        if loc.address < mp[1]:
            mp[1] = loc.address
            mp[3] = loc.object_offset
        mp[2] = max(mp[2], loc.address + 1)
        mp[5] = mp[5] or any(f is not None for _, f, _ in loc.lines)
        mp[6] = mp[6] or len(loc.lines) > 1
        _field_int(m, 2, mp[0])
        _field_int(m, 3, loc.address)
        for fr in conv._location_frames(loc):
            line = bytearray()
            _field_int(line, 1, function_id(fr.name, fr.file))
            _field_int(line, 2, fr.line)
            _field_bytes(m, 4, line)
        location_msgs.append(m)
        return gid

    samples = bytearray()
    for ri, run in enumerate(profile.runs):
        rs = conv.RunStacks(run)
        pid = run.startup.get("pid")
        for st, n, ns in rs.counted(kinds):
            m = bytearray()
            _field_packed(m, 1, [location_id(ri, run, lid) for lid in st.locations])
            _field_packed(m, 2, [n, ns])
            for key, text in (("thread", st.thread), ("group", st.group), ("kind", st.kind)):
                lab = bytearray()
                _field_int(lab, 1, keys[key])
                _field_int(lab, 2, s(text))
                _field_bytes(m, 3, lab)
            for key, num in (("tid", st.tid), ("pid", pid)):
                if isinstance(num, int):
                    lab = bytearray()
                    _field_int(lab, 1, keys[key])
                    _field_int(lab, 3, num)
                    _field_bytes(m, 3, lab)
            _field_bytes(samples, 2, m)
    out += samples
    # pprof takes the first mapping for the main binary (its "File:" and
    # "Build ID:" lines, and where it looks for symbols): each run's
    # program first, then the rest in the order met. In the order met
    # alone, a first sample in the runtime's own code made libcoz.so the
    # "main binary".
    def is_program(item):
        (ri, obj), mp = item
        start = profile.runs[ri].startup
        return bool(mp[4]) and mp[4] == start.get("build_id") or obj == start.get("argv0")

    ordered = sorted(mappings.items(), key=lambda item: (not is_program(item), item[1][0]))
    for (ri, obj), (mid, start, limit, offset, build_id, lines, inline) in ordered:
        m = bytearray()
        _field_int(m, 1, mid)
        _field_int(m, 2, start)
        _field_int(m, 3, limit)
        _field_int(m, 4, offset)
        _field_int(m, 5, s(obj))
        if build_id:
            _field_int(m, 6, s(build_id))
        _field_int(m, 7, 1)            # the runtime symbolized every location
        _field_int(m, 8, int(lines))
        _field_int(m, 9, int(lines))
        _field_int(m, 10, int(inline))
        _field_bytes(out, 3, m)
    for m in location_msgs:
        _field_bytes(out, 4, m)
    for m in function_msgs:
        _field_bytes(out, 5, m)
    # Strings used below must be interned before the table is written.
    first = profile.runs[0] if profile.runs else None
    period = first.startup.get("sample_period_ns") if first else None
    period_type = _value_type(s, "cpu", "nanoseconds")
    comment = s(f"coz export of {', '.join(profile.paths)}; samples of kind "
                f"{conv.describe_kinds(kinds)}")
    default_type = s(time_type)
    for text in s.table:
        _field_bytes(out, 6, text.encode("utf-8", errors="replace"))
    if first is not None:
        _field_int(out, 9, first.startup.get("time_ns") or 0)
    _field_int(out, 10, _duration(profile))
    _field_bytes(out, 11, period_type)
    if isinstance(period, int):
        _field_int(out, 12, period)
    _field_packed(out, 13, [comment])
    _field_int(out, 14, default_type)
    return bytes(out)


def _duration(profile):
    total = 0
    for r in profile.runs:
        wall = (r.counters or {}).get("wall_ns")
        total += wall if isinstance(wall, int) else r.runtime_ns
    return total


def pprof_bytes(profile, kinds=conv.DEFAULT_KINDS):
    """The gzipped Profile, as pprof reads it (mtime 0: the same profile gives
    the same bytes)."""
    return gzip.compress(pprof_message(profile, kinds), mtime=0)
