"""What a scripted model says: rules that pick a reply for each request, whatever the API.

A `Script` belongs to one agent (or several alike): its `match` is a string the requests
of that agent hold (its worktree's path, a word of its prompt), so one server answers many
agents at once. Its rules are tried in order; the first that applies answers:

    Rule(Reply(tools=(read("calc.py"),)), turn=1)          # the first model turn
    Rule(Reply(status=529), times=3)                        # three overloads, then the next
    Rule(Reply(text="Fixed."), last_contains="Feedback")    # once sent back
    Rule(Reply(text="Done."), turn=2, since="Feedback")     # the second reply after it

A `Conversation` is the request as the rules see it, the same for the three APIs: which
model turn it asks for (1 + the model replies already in its history), what its last user
message says (the prompt, a tool's result, kairo's feedback), the agent's working directory.
Pure: no sockets here (wire.py encodes, server.py serves).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Api = Literal["messages", "responses", "chat"]
CWD = "{cwd}"  # in a tool call's input: the agent's working directory, filled in per request


@dataclass(frozen=True)
class Usage:
    """What one answer reports using; `input_tokens` excludes the cache (as Anthropic's)."""

    input_tokens: int = 100
    output_tokens: int = 20
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def counted(self) -> tuple[int, int]:
        """(input, output) as kairo counts them: new input (fresh or written to the cache)."""
        return self.input_tokens + self.cache_creation_input_tokens, self.output_tokens


@dataclass(frozen=True)
class ToolCall:
    """A tool use: `input` a dict of arguments, or a string for a freeform tool (codex's
    `apply_patch`). "{cwd}" in any string of it becomes the agent's working directory."""

    name: str
    input: Mapping[str, Any] | str = field(default_factory=dict)

    def filled(self, cwd: str) -> ToolCall:
        return ToolCall(self.name, _fill(self.input, cwd))


def _fill(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace(CWD, cwd)
    if isinstance(value, Mapping):
        return {key: _fill(item, cwd) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_fill(item, cwd) for item in value]
    return value


@dataclass(frozen=True)
class Reply:
    """One answer: text and tool calls, the usage reported, how the turn stopped.

    `status` other than 200 answers with that HTTP error instead (429, 529, 401, ...);
    `hang` never answers; `delay_s` waits before answering; `stop="max_tokens"` ends the
    turn as cut off by the output limit (a tool call in it arrives cut short too).
    """

    text: str = ""
    tools: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop: Literal["end", "max_tokens"] = "end"
    status: int = 200
    retry_after_s: float | None = None  # with an error status: the retry-after header
    delay_s: float = 0.0
    hang: bool = False


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class Conversation:
    """A request as the rules see it."""

    api: Api
    model: str
    turn: int  # 1 + the model replies already in the history
    messages_text: str  # every message's text, tool results included, system prompts not
    last_text: str  # the last user message: the prompt, the feedback, or tool results
    tool_results: tuple[ToolResult, ...]  # those of the last user message
    cwd: str  # the agent's working directory, "" when the request does not say
    session: str  # the agent's own conversation id, "" when the request does not say
    raw: str  # the whole request body, as sent
    history: tuple[tuple[bool, str], ...] = ()  # (from the model, text) of each item

    def turn_since(self, words: str) -> int | None:
        """Which model turn this is, counted from the last message that held `words` (1:
        the first reply to it); None when none did. A resumed session's earlier turns,
        however its program kept them, do not count."""
        for index in range(len(self.history) - 1, -1, -1):
            from_model, text = self.history[index]
            if not from_model and words in text:
                later = self.history[index:]
                return 1 + sum(
                    1
                    for i, (model, _) in enumerate(later)
                    if model and (i == 0 or not later[i - 1][0])
                )
        return None


Answer = Reply | Callable[[Conversation], Reply]


@dataclass(frozen=True)
class Rule:
    reply: Answer
    turn: int | None = None  # only for this model turn of a conversation
    contains: str | None = None  # only when some message holds this
    last_contains: str | None = None  # only when the last user message holds this
    times: int | None = None  # answers at most this many requests (over every conversation)
    since: str | None = None  # `turn` counts from the last message that held this

    def applies(self, conversation: Conversation) -> bool:
        turn = conversation.turn if self.since is None else conversation.turn_since(self.since)
        return (
            (self.since is None or turn is not None)
            and (self.turn is None or turn == self.turn)
            and (self.contains is None or self.contains in conversation.messages_text)
            and (self.last_contains is None or self.last_contains in conversation.last_text)
        )

    def answer(self, conversation: Conversation) -> Reply:
        reply = self.reply(conversation) if callable(self.reply) else self.reply
        tools = tuple(call.filled(conversation.cwd) for call in reply.tools)
        return replace(reply, tools=tools)


DONE = Reply(text="Done.")


class Script:
    """An agent's rules; `match` routes requests to it (None: every request)."""

    def __init__(
        self,
        *rules: Rule,
        match: str | None = None,
        name: str | None = None,
        default: Answer = DONE,
    ) -> None:
        self.rules = rules
        self.match = match
        self.name = name or match or "default"
        self.default = default
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    def routes(self, conversation: Conversation) -> bool:
        return self.match is None or self.match in conversation.raw

    def reply(self, conversation: Conversation) -> Reply:
        """The first rule that applies and is not spent answers; else the default."""
        with self._lock:
            for index, rule in enumerate(self.rules):
                if rule.times is not None and self._used.get(index, 0) >= rule.times:
                    continue
                if rule.applies(conversation):
                    self._used[index] = self._used.get(index, 0) + 1
                    return rule.answer(conversation)
        return Rule(self.default).answer(conversation)


# --- the tool calls each agent program knows ----------------------------------------------


def read(path: str) -> ToolCall:
    """Claude Code's Read of `path`, relative to its working directory."""
    return ToolCall("Read", {"file_path": f"{CWD}/{path}"})


def edit(path: str, old: str, new: str) -> ToolCall:
    """Claude Code's Edit (the file must have been Read in the session first)."""
    return ToolCall("Edit", {"file_path": f"{CWD}/{path}", "old_string": old, "new_string": new})


def write(path: str, content: str) -> ToolCall:
    return ToolCall("Write", {"file_path": f"{CWD}/{path}", "content": content})


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": command[:40]})


def apply_patch(patch: str) -> ToolCall:
    """Codex's freeform `apply_patch`: the whole `*** Begin Patch` text."""
    return ToolCall("apply_patch", patch)


def exec_command(command: str) -> ToolCall:
    """Codex's shell tool."""
    return ToolCall("exec_command", {"cmd": command, "workdir": CWD})


def update_patch(path: str, old: str, new: str) -> str:
    """An apply_patch text that replaces the line `old` of `path` by `new`."""
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"


def search_replace(path: str, old: str, new: str) -> str:
    """An aider SEARCH/REPLACE block."""
    return f"{path}\n```python\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n```\n"
