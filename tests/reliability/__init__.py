"""Reliability: faults during enact, a worker killed mid-enact, workers racing rounds."""
