"""Presenters: the one place where engine data becomes what an admin reads.

`quantities` turns integer amounts into numbers with units (GiB, cores, cards, percent of a
card), `reasons` turns the engine's decisions into sentences, `details` their details into
labelled lines, and `words` holds the vocabulary they share (domains, pod counts). Both are pure
Python (no Django, no ORM), so pages, figures and the API share them.
"""
