"""Exhaustive model checking of the controller quorum (``floodmark sim check-quorum``)."""
