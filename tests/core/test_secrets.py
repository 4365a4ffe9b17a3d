"""What is a secret (by name, by value), and text with the secrets in it cut out."""

from __future__ import annotations

import os
import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import events as ev
from orchestrator.core.event_base import redact_printed
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.secrets import (
    Redactor,
    is_secret,
    random_looking,
    secret_name,
    secrets_of,
)

# Each shape as its issuer makes it (made-up values).
TOKENS = {
    "GitHub token": "ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4",
    "GitHub fine-grained token": "github_pat_11ABCDEFG0abcdefghij_KLMNOPQRSTUVWXYZabcdefghij0123",
    "GitLab token": "glpat-xY9zA8bC7dE6fG5hI4jK",
    "Anthropic key": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
    "OpenAI key": "sk-proj-Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9Bc1Ef3",
    "legacy OpenAI key": "sk-Ab3De5Gh7Jk9Mn1Pq3StT3BlbkFJ5Vw7Yz9Bc1Ef3Gh5Jk7",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "Slack token": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "npm token": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "Stripe key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "Google API key": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "Hugging Face token": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "URL with a password": "postgres://app:PASSWORD1234@db.internal:5432/shop",
    "URL with a password and no user": "redis://:s3cr3t-pw@cache:6379/0",
}

# What a developer's machine holds that is no secret, however long or odd.
ORDINARY = {
    "PATH": "/home/u/.cargo/bin:/home/u/.pyenv/shims:/usr/local/sbin:/usr/local/bin:/usr/bin",
    "LS_COLORS": "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01:"
    "*.tar=01;31:*.tgz=01;31:*.jpg=01;35:*.mp4=01;35:*.ogg=00;36",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    "XDG_SESSION_ID": "c2",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "GIT_COMMIT": "3f1e2d4c5b6a79801234567890abcdef12345678",
    "BUILD_ID": "0b0e9a4f-51c6-4b7a-9d7e-2f1c8a6b3e9d",
    "HTTPS_PROXY": "http://proxy.corp.example:3128",
    "PIP_INDEX_URL": "https://pypi.org/simple",
    "DOCKER_HOST": "unix:///run/user/1000/docker.sock",
    "PWD": "/home/u/src/sk-learn-playground",
    "OLDPWD": "/home/u",
    "LESSOPEN": "| /usr/bin/lesspipe %s",
    "PS1": r"\u@\h:\w\$ ",
    "KAIRO_IDEMPOTENCY_KEY": "f56beac18ca93f747da8e96eec0aed2d",
    "PYTHONPATH": "/home/u/src/project",
    "EDITOR": "vim",
    "SESSION_MANAGER": "local/host:@/tmp/.ICE-unix/1234,unix/host:/tmp/.ICE-unix/1234",
    "API_BASE": "https://api.example.com/v1",
}


def test_a_variable_is_a_secret_by_its_name_as_before() -> None:
    for name in (
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "db_passwd",
        "SSH_AUTH_SOCK",
    ):
        assert is_secret(name, "x")
    assert is_secret("GPG_PASSPHRASE", "x")
    assert not is_secret("KAIRO_IDEMPOTENCY_KEY", "f56beac18ca93f747da8e96eec0aed2d")


def test_a_variable_is_a_secret_by_its_value_whatever_its_name() -> None:
    for what, value in TOKENS.items():
        assert is_secret("BUILD_LABEL", value), what
        assert is_secret("BUILD_LABEL", f"Authorization: Bearer {value}"), what
    # kairo-orch's own names are no secret by name, but a value still is.
    assert is_secret("KAIRO_STORE", "postgresql://kairo:pw@db/kairo")


def test_under_a_name_that_hints_at_one_a_random_looking_value_is_a_secret() -> None:
    assert is_secret("GH_PAT", "Zx81kQm2Lp93Vb47Nc5R")
    assert is_secret("MYSQL_PWD", "q8XvR2mK7pL4nW9z")
    assert is_secret("SENTRY_DSN", "a9F3kL2mQ8xR7vT1wZ5p")
    assert not is_secret("GH_PAT", "short")  # nor a word, a path, a version
    assert not is_secret("API_VERSION", "2024-10-01")
    assert not is_secret("PWD", "/home/u/src/a1b2c3d4e5f6g7h8i9")


def test_ordinary_variables_are_no_secrets() -> None:
    assert secrets_of(ORDINARY) == {}


def test_this_machine_s_environment_holds_no_secret_by_value_alone() -> None:
    # Whatever it holds by name is its own business; of what no name calls a secret, no
    # value should be taken for one: the false positives a user would meet.
    found = [name for name, value in os.environ.items() if is_secret(name, value)]
    assert [name for name in found if not secret_name(name)] == []


_PATH_PART = st.text(string.ascii_lowercase + string.digits + "._-", min_size=1, max_size=12)
_ORDINARY_VALUES = st.one_of(
    st.lists(_PATH_PART, min_size=1, max_size=8).map(lambda parts: "/" + "/".join(parts)),
    st.lists(_PATH_PART, min_size=1, max_size=6).map(
        lambda parts: ":".join("/" + p for p in parts)
    ),
    st.builds(
        "{}://{}{}".format,
        st.sampled_from(["http", "https", "postgres", "unix", "ssh"]),
        _PATH_PART,
        st.lists(_PATH_PART, max_size=3).map(lambda parts: "".join("/" + p for p in parts)),
    ),
    st.text(string.hexdigits.lower(), min_size=7, max_size=64),  # hashes, ids
    st.uuids().map(str),
    st.integers().map(str),
    st.text(string.ascii_letters + " .,;:=-", max_size=80),  # words, settings
    st.lists(
        st.tuples(st.sampled_from(["di", "ln", "*.tar", "*.py"]), st.sampled_from(["01;34", "0"])),
        max_size=20,
    ).map(lambda pairs: ":".join(f"{k}={v}" for k, v in pairs)),
)
_ORDINARY_NAMES = st.sampled_from(
    ["PATH", "HOME", "LS_COLORS", "BUILD_ID", "GIT_COMMIT", "HTTPS_PROXY", "CACHE_DIR", "LANG"]
)


@given(_ORDINARY_NAMES, _ORDINARY_VALUES)
def test_generated_ordinary_variables_are_no_secrets(name: str, value: str) -> None:
    assert not is_secret(name, value)


@given(st.text(string.ascii_letters + string.digits, min_size=24, max_size=64))
def test_random_tokens_under_a_hinting_name_are_secrets(token: str) -> None:
    if any(c.isdigit() for c in token) and any(c.isalpha() for c in token) and len(set(token)) > 12:
        assert random_looking(token)
        assert is_secret("DEPLOY_PAT", token)


ENVIRONMENT = {
    **ORDINARY,
    "DATABASE_URL": "postgres://app:PASSWORD1234@db.internal:5432/shop",
    "DEPLOY_TOKEN": "deploy-9f8e7d6c5b4a",
    "BUILD_LABEL": TOKENS["GitHub token"],
    "TOKENIZERS_PARALLELISM": "false",
}


def test_a_redactor_cuts_out_each_secret_value_by_its_name() -> None:
    redactor = Redactor.of(ENVIRONMENT)
    printed = (
        f"connecting to {ENVIRONMENT['DATABASE_URL']} with {ENVIRONMENT['DEPLOY_TOKEN']}; "
        f"label {TOKENS['GitHub token']}; password PASSWORD1234; parallel: false"
    )

    assert redactor.text(printed) == (
        "connecting to [redacted: DATABASE_URL] with [redacted: DEPLOY_TOKEN]; "
        "label [redacted: BUILD_LABEL]; password [redacted: DATABASE_URL]; parallel: false"
    )


def test_a_redactor_cuts_out_credentials_of_known_shapes_it_was_not_told_of() -> None:
    redactor = Redactor()
    for what, value in TOKENS.items():
        redacted = redactor.text(f"found {value} here")
        assert value not in redacted, what
        assert "[redacted: " in redacted and redacted.startswith("found "), what
    url = redactor.text("cloning https://bot:hunter2@git.example/x.git")
    assert url == "cloning https://bot:[redacted: password]@git.example/x.git"


def test_a_tail_cut_in_the_middle_of_a_secret_loses_the_piece_too() -> None:
    redactor = Redactor.of(ENVIRONMENT)
    url = ENVIRONMENT["DATABASE_URL"]
    assert redactor.text(url[10:] + " then more") == "[redacted: DATABASE_URL] then more"
    assert redactor.text("more then " + url[:-4]) == "more then [redacted: DATABASE_URL]"
    cut_key = "Ab3\n-----END RSA PRIVATE KEY-----\ndone"
    assert Redactor().text(cut_key) == "[redacted: private key]\ndone"


def test_ordinary_text_is_left_alone() -> None:
    redactor = Redactor.of(ENVIRONMENT)
    text = (
        "pytest: 3 passed, task-abcdefghijklmnopqrstuvwxyz in sk-learn; commit "
        "3f1e2d4c5b6a79801234567890abcdef12345678 at https://example.com:443/a@b false\n"
    )
    assert redactor.text(text) == text


@given(
    st.text(max_size=40),
    st.sampled_from(sorted(v for v in ENVIRONMENT.values() if len(v) >= 8)),
    st.text(max_size=40),
)
def test_no_redacted_text_holds_a_secret_wherever_it_is(
    before: str, secret: str, after: str
) -> None:
    redactor = Redactor.of(ENVIRONMENT)
    if secret in ORDINARY.values():
        return
    assert secret not in redactor.text(before + secret + after)


def test_the_journal_cuts_secrets_out_of_what_events_quote_and_nothing_else() -> None:
    redactor = Redactor.of(ENVIRONMENT)
    secret = ENVIRONMENT["DEPLOY_TOKEN"]
    exited = ev.AttemptExited(
        subtask_id=f"s-{secret}",  # not printed text: an identity, kept as it is
        attempt=1,
        exit_code=0,
        output_tail=f"token {secret}",
        summary=f"I used {secret}",
        result=secret,
        refusals=(ev.Refusal(tool="Bash", target=f"curl -H {secret}", message=secret),),
    )
    failed = ev.SubtaskFailed(
        subtask_id="a", reason=Reason(code=ReasonCode.SETUP_FAILED, detail=secret)
    )

    redacted = redact_printed(exited, redactor.text)

    mark = "[redacted: DEPLOY_TOKEN]"
    assert redacted.output_tail == f"token {mark}" and redacted.summary == f"I used {mark}"
    assert redacted.result == mark and redacted.subtask_id == f"s-{secret}"
    assert redacted.refusals[0] == ev.Refusal(tool="Bash", target=f"curl -H {mark}", message=mark)
    assert redact_printed(failed, redactor.text).reason.detail == mark
    untouched = ev.VerifyFinished(subtask_id="a", attempt=1, exit_code=0, output_tail="ok")
    assert redact_printed(untouched, redactor.text) is untouched
