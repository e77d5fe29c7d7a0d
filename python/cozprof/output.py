"""The `coz` command's standard output and error: what it writes there never
ends in a UnicodeEncodeError.

Text for people (tables, `--list`'s source, messages) goes through the
streams with the error handler ESCAPE (installed by `cli.main`): a byte of a
file name that is not valid in the locale's encoding, which Python decodes as
a lone surrogate U+DC80-U+DCFF, is written back as that byte, as the user
typed it; any other character the encoding lacks (`PYTHONIOENCODING=ascii`, a
Latin-1 terminal) becomes a backslash escape. Python's own defaults are
'strict' on standard output (a traceback) and 'backslashreplace' on standard
error (a file name shown as `\\udcff`).

Data other tools read (folded stacks, the HTML page) is written by
`write_data` as UTF-8 bytes, whatever the locale: escapes would change it.
"""

import codecs
import sys

ESCAPE = "cozprof-escape"

_SURROGATE_BYTES = range(0xDC80, 0xDD00)  # surrogateescape's: bytes 0x80-0xff


def _escape(err):
    """Error handler ESCAPE, one character at a time."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    code = ord(err.object[err.start])
    if code in _SURROGATE_BYTES:
        return bytes([code - 0xDC00]), err.start + 1
    if code <= 0xFF:
        text = f"\\x{code:02x}"
    elif code <= 0xFFFF:
        text = f"\\u{code:04x}"
    else:
        text = f"\\U{code:08x}"
    return text, err.start + 1


def _register():
    try:
        codecs.lookup_error(ESCAPE)
    except LookupError:
        codecs.register_error(ESCAPE, _escape)


def install():
    """Register ESCAPE and use it on sys.stdout and sys.stderr (those that are
    open text streams: Python sets a closed one to None)."""
    _register()
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=ESCAPE)


def utf8(text):
    """`text` as UTF-8, file names' undecodable bytes as they were."""
    _register()
    return text.encode("utf-8", ESCAPE)


def write_data(text):
    """Write `text` to standard output as UTF-8 (see `utf8`)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)  # a stream without bytes (a test's StringIO)
        return
    sys.stdout.flush()
    buffer.write(utf8(text))
    buffer.flush()
