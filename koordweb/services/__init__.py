"""Writes: one transactional function per action, named <entity>_<action>."""
