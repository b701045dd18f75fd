"""What Codex injects into a rollout besides the conversation: kept once per session, by hash.

Every Codex session starts with its own system prompt (``session_meta.base_instructions``, about
20 KB), developer messages (permissions, collaboration mode, the skills list — up to 25 KB, the
apps and plugins lists, a model switch), and user-role blocks the user never typed: the project's
``AGENTS.md`` (up to 30 KB), ``<environment_context>`` (working directory, shell, date, time zone),
skill bodies (``<skill>``), ``<turn_aborted>`` markers. Stored as events they cost about 28 KB a
session, repeated identically in every session, and read as the user's words.

So the importer keeps them **once per session, in metadata, by hash**: the ``session_meta``
line becomes one ``system`` event (bookkeeping class ``instructions``) whose metadata lists every
instruction block of the session's opening — ``{"kind", "sha256", "chars"}`` (and ``path`` for
an ``AGENTS.md``) — with the session's CLI version, originator, model provider, git state and
sub-agent lineage; the blocks themselves are skipped (counted), their text dropped. A block that
arrives later in the session (a model switch, a new skill) and is not one of the opening's
becomes a short ``instructions`` event naming its kind, size and hash. ``<environment_context>``
(a few hundred bytes) stays as text, marked ``context``, with its fields parsed into metadata;
``<turn_aborted>`` is an ``interrupt`` and a sub-agent notification a ``notice``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memtoc.model import JsonValue

INSTRUCTION_PREFIXES = (
    "# AGENTS.md instructions",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<skill>",
)
_CONTEXT = "<environment_context>"
_INTERRUPT = "<turn_aborted>"
_NOTICES = ("<subagent_notification>", "<agent_message>")
_TAG = re.compile(r"\s*<([A-Za-z][\w .-]{0,60})>")
_AGENTS_MD = re.compile(r"# AGENTS\.md instructions for ([^\n]+)")
_FIELD = re.compile(r"<(\w+)>([^<\n]{1,500})</\1>")


@dataclass(frozen=True, slots=True)
class Block:
    """One injected instruction text, known by its kind, hash and size."""

    kind: str
    sha256: str
    chars: int
    path: str | None = None

    def describe(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"kind": self.kind, "sha256": self.sha256, "chars": self.chars}
        if self.path is not None:
            out["path"] = self.path
        return out

    def stub(self, role: str) -> str:
        """The short text that stands for the block when it arrives mid-session."""
        return (
            f"[Codex {role} instructions: {self.kind}, {self.chars:,} characters, "
            f"sha256 {self.sha256[:12]}]"
        )


def block_of(text: str, kind: str | None = None) -> Block:
    """The block a text is: its kind (the leading tag, ``AGENTS.md``, or ``kind``), hash, size."""
    path = None
    found = _AGENTS_MD.match(text.lstrip())
    if found:
        kind, path = "AGENTS.md", found.group(1).strip()
    elif kind is None:
        tag = _TAG.match(text)
        kind = tag.group(1) if tag else "developer"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return Block(kind, digest, len(text), path)


def classify(role: str, text: str) -> tuple[str, Block | None] | None:
    """(bookkeeping class, instruction block or None) of an injected message text; None for a
    message someone wrote (a user's prompt, the assistant's reply)."""
    if role in ("developer", "system"):
        return "instructions", block_of(text)
    if role != "user":
        return None
    stripped = text.lstrip()
    if stripped.startswith(INSTRUCTION_PREFIXES):
        return "instructions", block_of(text)
    if stripped.startswith(_CONTEXT):
        return "context", None
    if stripped.startswith(_INTERRUPT):
        return "interrupt", None
    if stripped.startswith(_NOTICES):
        return "notice", None
    return None


def environment(text: str) -> dict[str, JsonValue]:
    """The simple fields of an ``<environment_context>`` block (``cwd``, ``shell``,
    ``current_date``, ``timezone`` …), under their own names."""
    return {name: value.strip() for name, value in _FIELD.findall(text)}
