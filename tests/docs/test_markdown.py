"""The doc runner's reading of markdown: tags, skips, expected output with `...`."""

from __future__ import annotations

from pathlib import Path

from tests.docs.markdown import blocks, console_parts, output_matches
from tests.docs.runner import page_steps


def test_blocks_carry_their_directives(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- docs-run: skip (needs Docker) -->\n```bash\ndocker ps\n```\n\n"
        "```bash\necho hi\n```\n<!-- docs-run: output -->\n```text\nhi\n```\n"
        "1. a list\n   ```toml\n   a = 1\n   ```\n"
    )
    found = blocks(page)
    assert [(b.lang, b.skip, b.is_output) for b in found] == [
        ("bash", "(needs Docker)", False),
        ("bash", None, False),
        ("text", None, True),
        ("toml", None, False),
    ]
    assert found[3].text == "a = 1\n" and found[1].line == 8


def test_a_separate_block_runs_apart_with_its_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\necho page\n```\n<!-- docs-run: output -->\n```text\npage\n```\n"
        "<!-- docs-run: separate (another setting) -->\n```bash\necho apart\n```\n"
        "<!-- docs-run: output -->\n```text\napart\n```\n"
        "<!-- docs-run: skip (needs Docker) -->\n```bash\ndocker ps\n```\n"
        "<!-- docs-run: output -->\n```text\nCONTAINER ID\n```\n"
    )
    assert blocks(page)[2].separate == "(another setting)"
    in_page = [(s.script, s.expected) for s in page_steps(page, {})]
    apart = [(s.script, s.expected) for s in page_steps(page, {}, separate=True)]
    assert in_page == [("echo page\n", "page\n")]
    assert apart == [("echo apart\n", "apart\n")]


def test_expected_output_with_ellipses() -> None:
    assert output_matches(
        "log in as admin / ...  (admin)", "x\nlog in as admin / s3cr3t  (admin)\n"
    )
    assert output_matches("a\n...\nd", "a\nb\nc\nd\n")
    assert not output_matches("a\nd", "a\nb\nd\n")
    assert not output_matches("node-c", "node-a\n")
    assert console_parts("$ echo a \\\n  b\na b\n") == ("echo a \\\n  b\n", "a b")
