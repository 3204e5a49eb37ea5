"""The errors dlsweep raises on bad input, each a one-line message that says what was wrong and,
where it can, what to do (a leaf: imports nothing of dlsweep, so the command line can catch them
without loading the library)."""


class SpecError(ValueError):
    """A sweep specification that cannot be run; the message names file, key and expectation."""


class StoreError(RuntimeError):
    """A dataset folder that cannot be written or read as asked; the message says why and what to do."""


class ThresholdError(ValueError):
    """Thresholds asked for something the run or Definition 1 does not allow; the message says what."""


class PlotError(ValueError):
    """A figure that cannot be drawn as asked; the message names the option and what was expected."""
