"""The one warning class of dlsweep: something the user should know that does not stop the work.

`dlsweep.cli.main` prints each as one line `dlsweep: warning: ...` on stderr; from Python it is
an ordinary `UserWarning` subclass, so `warnings.filterwarnings("error", category=DlsweepWarning)`
turns them into errors.
"""

from __future__ import annotations


class DlsweepWarning(UserWarning):
    """A surprise worth a line on stderr (e.g. a seed axis over a model with no randomness)."""
