"""Template tags of the UI pages (see koordweb_ui)."""
