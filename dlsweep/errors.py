"""The errors dlsweep raises on bad input, each a one-line message that names what was wrong (a
leaf: imports nothing of dlsweep)."""


class SpecError(ValueError):
    """A sweep specification that cannot be run; the message names file, key and expectation."""
