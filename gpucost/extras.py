"""The adaptor's former name, kept for code that imports it: see :mod:`gpucost._optional`."""

from gpucost._optional import (
                               EXTRAS,
                               install_hint,
                               installed,
                               missing_extra,
                               optional,
                               require,
                               require_installed,
)
from gpucost.errors import MissingExtraError

__all__ = ["EXTRAS", "MissingExtraError", "install_hint", "installed", "missing_extra",
           "optional", "require", "require_installed"]
