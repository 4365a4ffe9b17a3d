"""A scripted model server for the real agent programs (script.py, wire.py, server.py)."""

from tests.model_server.script import (
    Conversation,
    Reply,
    Rule,
    Script,
    ToolCall,
    Usage,
    apply_patch,
    bash,
    edit,
    exec_command,
    read,
    search_replace,
    update_patch,
    write,
)
from tests.model_server.server import Exchange, ModelServer, serve

__all__ = [
    "Conversation",
    "Exchange",
    "ModelServer",
    "Reply",
    "Rule",
    "Script",
    "ToolCall",
    "Usage",
    "apply_patch",
    "bash",
    "edit",
    "exec_command",
    "read",
    "search_replace",
    "serve",
    "update_patch",
    "write",
]
