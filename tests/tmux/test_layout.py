"""The pure half of the tmux layer: argv building and output parsing."""

from __future__ import annotations

import pytest

from orchestrator.tmux import layout
from orchestrator.tmux.layout import PaneInfo, PaneRef
from tests.tmux.conftest import split_chain


def test_an_argument_ending_in_a_semicolon_cannot_end_the_command() -> None:
    assert layout.escape_arg("a;") == "a\\;"
    assert layout.escape_arg(";") == "\\;"
    assert layout.escape_arg("b\\;") == "b\\\\;"  # tmux turns the last '\;' back into ';'
    assert layout.escape_arg("a;b") == "a;b"


def test_chain_separates_commands_and_escapes_their_arguments() -> None:
    assert layout.chain(["a", "x;"], ["b"], ["c"]) == ["a", "x\\;", ";", "b", ";", "c"]


def test_format_expanded_arguments_and_titles() -> None:
    assert layout.literal("#{pane_id} #x") == "##{pane_id} ##x"
    assert layout.clean_title("a\tb\nc\x1b]2;x\x07\u202e ") == r"a\tb\nc\x1b]2;x\x07\u202e"
    assert layout.clean_title("\n") == "agent"


def test_pane_commands_are_argv_never_a_shell_string() -> None:
    assert layout.pane_command(["sleep", "1"]) == ["sleep", "1"]
    assert layout.pane_command(["/bin/it's"]) == ["/bin/sh", "-c", 'exec "$0"', "/bin/it's"]
    with pytest.raises(ValueError, match="login shell"):
        layout.pane_command([])


@pytest.mark.parametrize("name", ["", "a.b", "a:b"])
def test_session_names_tmux_would_rewrite_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="session name"):
        layout.check_session_name(name)


def test_split_sets_the_title_of_the_new_pane_and_tiles() -> None:
    argv = layout.chain(*layout.split_commands("@3", layout.NewPane("t #1", ["run", "x"], "/w#")))
    assert argv == [
        *["split-window", "-t", "@3", "-c", "/w##", "-P", "-F", layout.REF_FORMAT],
        *["--", "run", "x", ";", "select-pane", "-T", "t ##1", ";"],
        *["set-option", "-p", layout.TITLE_OPTION, "t #1", ";"],
        *["select-layout", "-t", "@3", "tiled"],
    ]


def test_new_window_is_detached_and_targets_its_pane_by_name() -> None:
    pane = layout.NewPane("t", ["run", "x"], "/w")
    argv = layout.chain(*layout.new_window_commands("s", "agents-2", pane))
    create, *options, title, our_title = split_chain(argv)

    assert create == [
        *["new-window", "-d", "-t", "=s:", "-n", "agents-2", "-c", "/w"],
        *["-P", "-F", layout.REF_FORMAT, "--", "run", "x"],
    ]
    assert ["set-option", "-w", "-t", "=s:=agents-2", "remain-on-exit", "on"] in options
    assert title == ["select-pane", "-t", "=s:=agents-2", "-T", "t"]
    assert our_title == ["set-option", "-p", "-t", "=s:=agents-2", layout.TITLE_OPTION, "t"]


def test_new_session_sets_its_options_in_the_same_call() -> None:
    argv = layout.new_session_argv(
        "s",
        window_name="w",
        title="t",
        command=["c", "d"],
        cwd="/",
        width=9,
        height=8,
        environment={"A": "1"},
    )
    create, *options = split_chain(argv)

    assert create == [
        *["new-session", "-d", "-s", "s", "-n", "w", "-x", "9", "-y", "8", "-c", "/"],
        *["-e", "A=1", "-P", "-F", "#{pane_id}", "--", "c", "d"],
    ]
    assert ["set-option", "-t", "=s:", "history-limit", str(layout.HISTORY_LIMIT)] in options
    assert ["set-option", "-w", "-t", "=s:", "pane-border-status", "top"] in options
    assert ["set-option", "-p", "-t", "=s:", layout.TITLE_OPTION, "t"] in options


def test_respawn_pane_escapes_its_arguments() -> None:
    argv = layout.respawn_pane_argv("s", "w", ["c", "ends;"])

    assert argv == ["respawn-pane", "-k", "-t", "=s:=w", "--", "c", "ends\\;"]


def test_parse_panes_prefers_our_title() -> None:
    text = "%1\t100\t0\tours\ttheirs\n%2\t101\t1\t\ttheirs\twith tab\n"
    assert layout.parse_panes(text) == [
        PaneInfo("%1", 100, "ours", dead=False),
        PaneInfo("%2", 101, "theirs\twith tab", dead=True),
    ]
    assert layout.parse_pane_ref("%7\t@2\n") == PaneRef("%7", "@2")


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("tmux 3.3a\n", (3, 3)),
        ("tmux next-3.5\n", (3, 5)),
        ("tmux 2.9", (2, 9)),
        ("tmux master", (99, 0)),
    ],
)
def test_parse_version(text: str, version: tuple[int, int]) -> None:
    assert layout.parse_version(text) == version


def test_parse_version_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="cannot read a tmux version"):
        layout.parse_version("screen 4")
