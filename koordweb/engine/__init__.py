"""The one home where the web asks the engine (issue #34, "one home for the boundary").

`reads`: every read-side question the pages and the API put to the engine (the topology tree and
its offer slots, feasibility, what-if's live state), answered from one engine state per cluster
and change position. Later the rows -> snapshot step (cold and warm) and the round pipeline move
in here too.
"""
