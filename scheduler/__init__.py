"""The scheduling engine: a pure-Python library (numpy, networkx), no Django, no clock, no I/O."""
