"""Cluster backends behind one protocol (sync, enact): simulated and kubernetes."""
