"""The public face above one card and many: Session, compare, timing-only runs."""

from graphexec.api.compare import Comparison, compare
from graphexec.api.session import Session

__all__ = ["Comparison", "Session", "compare"]
