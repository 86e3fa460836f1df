"""Exception types shared across the package.

Kept in their own module so that every other module can raise them without
import cycles, and so users can catch them from ``judge`` directly.
"""

from __future__ import annotations

__all__ = ["NotCalibratedError", "LabelError"]


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
