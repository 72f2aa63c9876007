"""Where the plugin guide's out-of-tree example package lives (docs/plugins.md), for the tests
that import its plugins or install it."""

from pathlib import Path

EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "examples" / "prefer-label-plugin"
