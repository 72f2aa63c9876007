"""Tests of the round oracle (`scheduler.oracle`): its rules on hand-made rounds, and the engine
checked by it over generated clusters."""
