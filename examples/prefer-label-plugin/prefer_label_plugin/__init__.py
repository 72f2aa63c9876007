"""Two example koordweb scheduler plugins, registered by entry point (see pyproject.toml)."""
