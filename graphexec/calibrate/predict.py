"""What graphexec says a measured row takes, on a given profile: a whole model by a
timing-only simulation (``Session.simulate``), a collective by the collective model the
simulated runs use (``hccl.collective_us``). Graphs are loaded once per file."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from graphexec.api import Session
from graphexec.calibrate.tables import Measurement
from graphexec.errors import CalibrationError
from graphexec.frontend import load
from graphexec.hccl import collective_us
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.systems import SystemProfile


@lru_cache(maxsize=16)
def _graph(path: str) -> Any:
    return load(path)


def simulated_us(m: Measurement, profile: DeviceProfile | SystemProfile) -> float:
    """The simulated time of row ``m`` on ``profile`` (a system's rows run on its cards)."""
    if m.kind == "collective":
        if not isinstance(profile, SystemProfile):
            raise CalibrationError(f"{m.where}: a collective row needs a system profile to run on")
        if m.ranks > profile.count:
            raise CalibrationError(f"{m.where}: {m.ranks} ranks, but system '{profile.name}' has {profile.count} cards")
        return collective_us(m.collective, float(m.nbytes), profile, list(range(m.ranks)), m.dtype)
    device = profile.device_profile if isinstance(profile, SystemProfile) else profile
    session = Session(_graph(m.model), streams=m.streams, device=device)
    return float(session.simulate(shapes=dict(m.shapes)).stats.makespan_us)
