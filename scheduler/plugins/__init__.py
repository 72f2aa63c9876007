"""Plugins of the engine, one concern per module; each docstring names its extension points."""
