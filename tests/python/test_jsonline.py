"""jsonline.raw_decode is json's own scanner without the json module: the same
values and the same accepted texts as json.JSONDecoder().raw_decode."""
import json
import math

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
           '{"a":[1,]}', "-", '{"a":"\\x"}']


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
