"""The fenced blocks of a markdown page, as the doc runner reads them.

A ```bash or ```sh block runs; a ```console block runs its `$ ` lines and expects the lines after
each as output; a block right after the comment `<!-- docs-run: output -->` is the expected output
of the block before it. `<!-- docs-run: skip (reason) -->` on the line before a fence skips that
block, with its reason; `<!-- docs-run: separate (reason) -->` leaves it out of the page's run, for
a run of its own (a recipe that needs another setting than the rest of its page). In expected
output, `...` stands for any text on a line, and a line that is only `...` for any number of lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = frozenset({"bash", "sh"})
# Languages a page may tag a block with; an untagged block could hide a command that never runs.
KNOWN = RUNNABLE | {"console", "text", "json", "yaml", "toml", "python", "ini"}
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
DIRECTIVE = re.compile(
    r"^\s*<!--\s*docs-run:\s*(?P<verb>skip|output|separate)\b\s*(?P<note>.*?)\s*-->\s*$"
)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and what the page says of it."""

    page: str
    line: int
    lang: str
    text: str
    skip: str | None = None  # the reason, when the page skips it
    separate: str | None = None  # the reason, when it runs apart from the rest of its page
    is_output: bool = False  # the expected output of the block before it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    directive: re.Match[str] | None = None
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                directive = DIRECTIVE.match(lines[i])
            i += 1
            continue
        indent, start = len(fence["indent"]), i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        verb = directive["verb"] if directive else None
        note = (directive["note"] if directive else "") or "no reason given"
        found.append(
            Block(
                page=path.name,
                line=start,
                lang=fence["lang"],
                text="\n".join(body) + "\n",
                skip=note if verb == "skip" else None,
                separate=note if verb == "separate" else None,
                is_output=verb == "output",
            )
        )
        directive = None
        i += 1
    return found


def console_parts(text: str) -> tuple[str, str]:
    """A console block's commands (its `$ ` lines and the lines a trailing `\\` continues) and
    its expected output (the other lines)."""
    commands: list[str] = []
    expected: list[str] = []
    for line in text.splitlines():
        continued = bool(commands) and commands[-1].endswith("\\")
        if line.startswith("$ ") or continued:
            commands.append(line[2:] if line.startswith("$ ") else line)
        else:
            expected.append(line)
    return "\n".join(commands) + "\n", "\n".join(expected)


def output_pattern(expected: str) -> re.Pattern[str]:
    """Expected output as a pattern: `...` is any text within a line, a lone `...` any lines."""
    parts = []
    for line in expected.strip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        parts.append(
            ".*?".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"[^\n]*\n"
        )
    return re.compile("(?m)^" + "".join(parts))


def output_matches(expected: str, output: str) -> bool:
    return (
        output_pattern(expected).search(output if output.endswith("\n") else output + "\n")
        is not None
    )
