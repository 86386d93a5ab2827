"""Fault injection and proof on real processes (floodmark chaos)."""
