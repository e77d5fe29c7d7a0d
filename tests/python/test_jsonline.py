"""jsonline.raw_decode is json's own scanner without the json module: the same
values and the same accepted texts as json.JSONDecoder().raw_decode."""
import json
import math
import os
import subprocess
import sys

import pytest

from cozprof import jsonline

VALID = [
    '{"type":"startup","version":1,"argv0":"/bin/x","cpus":2,"cpu_quota":null}',
    '{"a":[1,2.5,-3e-7,1E+400,true,false,null],"b":{"c":"\\u00e9\\ud83d\\ude00\\n\\"q\\""}}',
    '{"big":123456789012345678901234567890,"neg":-0,"f":0.1}',
    '{"nan":NaN,"inf":Infinity,"ninf":-Infinity}',
    '{"x":1} trailing',          # raw_decode stops at the value's end
    '[1,{"k":[]}]',
    '"a string"',
    '{"dup":1,"dup":2}',
    '{"ü":"ü\u2028"}',
]

INVALID = ['', ' {"a":1}', '{"a":1', "{'a':1}", '{"a":01}', '{"a":"\x01"}', "nope", '{"a":tru}',
           '{"a":[1,]}', "-", '{"a":"\\x"}', '{"type":"locks","elapsed_ns":12226851,"', '{"a":1 "b":2}']


@pytest.mark.parametrize("text", VALID)
def test_the_same_values_as_json(text):
    got, end = jsonline.raw_decode(text)
    want, want_end = json.JSONDecoder().raw_decode(text)
    assert end == want_end
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    if "NaN" in text:
        assert math.isnan(got["nan"]) and got["inf"] == math.inf and got["ninf"] == -math.inf


@pytest.mark.parametrize("text", INVALID)
def test_the_same_texts_refused(text):
    with pytest.raises(ValueError):
        json.JSONDecoder().raw_decode(text)
    with pytest.raises(ValueError):
        jsonline.raw_decode(text)


def test_the_scanner_is_the_c_one():
    # Where _json exists (CPython), the fast path is taken, not json's fallback.
    assert jsonline._make_scanner is not None


def test_refused_texts_raise_valueerror_where_json_was_never_imported():
    # The launcher reads its summary without importing json. There the C
    # scanner's errors other than "Expecting value" (an unterminated string,
    # a missing comma: a profile cut by a full disk) look json.decoder up in
    # sys.modules, find nothing and raised SystemError, which cost the run
    # its summary. Run in a fresh interpreter: this one has json imported.
    code = (
        "import sys\n"
        "from cozprof import jsonline\n"
        "assert 'json.decoder' not in sys.modules\n"
        f"for text in {INVALID!r}:\n"
        "    try:\n"
        "        jsonline.raw_decode(text)\n"
        "    except ValueError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError(text)\n"
        "print('ok')\n"
    )
    python_dir = os.path.dirname(os.path.dirname(jsonline.__file__))
    env = dict(os.environ, PYTHONPATH=python_dir)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == b"ok\n", r.stderr.decode()
