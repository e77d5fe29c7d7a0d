"""A profile line's JSON value, read without importing json.

`coz run` reads the profile after the program ends, for its summary line.
Importing json there imports re, and re imports enum. In a fresh
interpreter that took 11 ms (median of 25 runs, 2026-11-29, the 2-CPU VM),
longer than the whole run of a short program. The launcher starts that
import while the program runs, but a short program ends before it does.

`raw_decode` is json's own C scanner, the one `json.loads` and
`JSONDecoder.raw_decode` call (`_json.make_scanner`), with json's defaults.
It accepts exactly what they accept and returns the same values. Only the
error of a missing value differs: a plain ValueError; the other errors
import json and are its JSONDecodeError (a ValueError too). Without the C
module, json itself is used."""

try:
    from _json import make_scanner as _make_scanner
except ImportError:  # an interpreter without json's accelerator
    _make_scanner = None


class _Defaults:
    """What the scanner reads of a JSONDecoder: json.JSONDecoder()'s defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


if _make_scanner is not None:
    _scan_once = _make_scanner(_Defaults())

    def raw_decode(text):
        """(value, end) of the JSON value at the start of `text`, as
        json.JSONDecoder().raw_decode(text) gives them; ValueError where
        there is none."""
        try:
            return _scan_once(text, 0)
        except StopIteration as e:
            raise ValueError(f"Expecting value: column {e.value + 1}") from None
        except SystemError:
            # The scanner's other errors (an unterminated string, a missing
            # comma: a line cut by a full disk) are json.decoder's
            # JSONDecodeError, which the scanner looks up in sys.modules
            # without importing it: until something imports json it returns
            # no exception at all (CPython 3.11). json itself says what is
            # wrong, and is imported from then on.
            import json

            return json.JSONDecoder().raw_decode(text)
else:
    def raw_decode(text):
        import json

        return json.JSONDecoder().raw_decode(text)
