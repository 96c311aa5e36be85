"""KServe v1's checks of a predict body, as KServe's data plane makes them, without sockets."""

from __future__ import annotations

import pytest

from modelhost.errors import BadRequestBody
from modelhost.protocols.kserve_v1 import check_body

JSON = "application/json"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"instances": [[5.1, 3.5]]}', JSON),
        (b' {"instances": [], "parameters": {"a": 1}} ', JSON),
        (b'{"inputs": "a sentence"}', JSON),  # a model of its own reads what it likes
        (b'{"signature_name": "x"}', "application/json; charset=utf-8"),
        (b"[[5.1, 3.5]]", ""),
        (b'{"instances": [[NaN, 1]]}', JSON),  # modelhost's codecs read NaN as missing
        (b"not json", "text/csv"),  # another type goes to the model as it came
        (b"\x89PNG", "image/png"),
    ],
)
def test_bodies_kserve_takes_pass(body: bytes, content_type: str) -> None:
    check_body(body, content_type)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"instances": [[1,', "Unrecognized request format"),
        (b"", "Unrecognized request format"),
        (b'{"instances": [1]} trailing', "Unrecognized request format"),
        (b'{"instances": "5.1,3.5"}', 'Expected "instances" to be a list'),
        (b'{"instances": null}', 'Expected "instances" to be a list'),
        (b'{"instances": {"a": 1}}', 'Expected "instances" to be a list'),
        (b'{"instances": NaN}', 'Expected "instances" to be a list'),
    ],
)
def test_bodies_kserve_refuses_answer_400(body: bytes, words: str) -> None:
    with pytest.raises(BadRequestBody) as refused:
        check_body(body, JSON)
    assert words in str(refused.value)
    assert '{"instances": [' in str(refused.value)  # what to send instead
