"""Exception types shared across the package, and where its warnings point.

Kept in their own module so that every other module can raise them without
import cycles, and so users can catch them from ``judge`` directly.
"""

from __future__ import annotations

import os
import sys

__all__ = ["NotCalibratedError", "LabelError", "caller_stacklevel"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package: the caller's line.

    Called by the function that warns, right where it warns: however many of the package's own
    frames sit between it and the caller (``predict`` -> the compiled set -> a scoring path), the
    warning names the caller's file and line.

    Examples
    --------
    >>> import warnings
    >>> def warns():
    ...     warnings.warn("here", stacklevel=caller_stacklevel())
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warns()
    >>> w[0].filename.startswith(_PACKAGE)
    False
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


class NotCalibratedError(ValueError, AttributeError):
    """Raised when calibrated output is asked for before ``calibrate``/``fit``.

    Subclasses both ``ValueError`` and ``AttributeError`` (as scikit-learn's
    ``NotFittedError`` does) so ``hasattr``-style checks keep working.

    Examples
    --------
    >>> from judge import NotCalibratedError
    >>> issubclass(NotCalibratedError, ValueError)
    True
    """


class LabelError(ValueError):
    """Raised when a label set cannot be used (empty, duplicated, unspellable).

    Examples
    --------
    >>> from judge import LabelError
    >>> issubclass(LabelError, ValueError)
    True
    """
