"""RFC 8785 canonical JSON and the event hash chain of store.md (pure)."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

GENESIS = "GENESIS"


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value: the only form that is ever hashed."""
    return rfc8785.dumps(value)


def envelope(
    *,
    execution_id: str,
    seq: int,
    event_type: str,
    schema_version: int,
    created_at: str,
    payload: dict[str, Any],
) -> dict[str, Any]:
    return {
        "execution_id": execution_id,
        "seq": seq,
        "event_type": event_type,
        "schema_version": schema_version,
        "created_at": created_at,
        "payload": payload,
    }


def chain_hash(previous_hash: str | None, envelope_value: dict[str, Any]) -> str:
    """event_hash_n = sha256_hex(event_hash_{n-1} + canonical_json(envelope_n)); GENESIS at 0."""
    prefix = GENESIS if previous_hash is None else previous_hash
    digest = hashlib.sha256(prefix.encode("ascii"))
    digest.update(canonical_json(envelope_value))
    return digest.hexdigest()
