"""Secret values cut out of a stream as it passes, however it is split."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from agents.redaction import StreamRedactor

SECRETS = [("API_KEY", b"sk-ant-api03-abcdefghijkl"), ("DEPLOY_TOKEN", b"deploy-9f8e7d6c")]


def through(redactor: StreamRedactor, chunks: list[bytes]) -> bytes:
    return b"".join(redactor.feed(chunk) for chunk in chunks) + redactor.flush()


def test_a_secret_split_across_reads_is_cut_out_whole() -> None:
    redactor = StreamRedactor(SECRETS)

    first = redactor.feed(b"key: sk-ant-api0")
    rest = redactor.feed(b"3-abcdefghijkl, done\n") + redactor.flush()

    assert first == b"key: "  # what may begin a secret waits for the next read
    assert first + rest == b"key: [redacted: API_KEY], done\n"
    assert redactor.redacted


def test_what_only_looked_like_the_beginning_of_one_is_passed_on() -> None:
    redactor = StreamRedactor(SECRETS)

    assert redactor.feed(b"deploy-9f") == b""
    assert redactor.feed(b"00 ok\n") == b"deploy-9f00 ok\n"
    assert redactor.feed(b"a prompt: deplo") == b"a prompt: "
    assert redactor.flush() == b"deplo"  # the stream ended: no secret followed
    assert not redactor.redacted


def test_with_no_secrets_everything_passes_at_once() -> None:
    redactor = StreamRedactor([])
    assert redactor.feed(b"sk-ant-") == b"sk-ant-"


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=30),
            st.sampled_from([value for _, value in SECRETS]),
            st.sampled_from([b"sk-ant-", b"deploy-", b"\n"]),
        ),
        max_size=12,
    ),
    st.lists(st.integers(min_value=0, max_value=200), max_size=10),
)
def test_however_a_stream_is_split_no_secret_passes(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    bounds = sorted({0, len(stream), *(c for c in cuts if c <= len(stream))})
    chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]

    split = through(StreamRedactor(SECRETS), chunks)

    assert split == through(StreamRedactor(SECRETS), [stream])
    for _, value in SECRETS:
        assert value not in split
