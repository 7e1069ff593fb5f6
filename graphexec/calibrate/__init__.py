"""``graphexec calibrate``: fit a device or system profile's free parameters to measurements.

The parameters are the profile's own fields, named by dotted path (``params.py``); the rows
are whole-model runs and collective tables (``tables.py``), re-simulated timing-only
(``predict.py``); Levenberg-Marquardt on log ratios fits them, after checking the rows can
pin them (``fit.py``), with a share of the rows held out (``run.py``); the fitted profile is
YAML whose sources name the rows (``write.py``).

Example:
    >>> from graphexec.calibrate import Target, calibrate, read_models_csv
    >>> target = Target.load("ascend310p", None)
    >>> cal = calibrate(target, read_models_csv("rows.csv"), {"kernels.cube.efficiency.default": None})
    >>> cal.fitted, cal.summary()
"""

from graphexec.calibrate.fit import check_identifiable, levenberg_marquardt
from graphexec.calibrate.params import Param, Target
from graphexec.calibrate.run import Calibration, calibrate, error, held_out
from graphexec.calibrate.tables import Measurement, read_collective_table, read_models_csv, read_ops
from graphexec.calibrate.write import profile_yaml, write_profile

__all__ = ["Calibration", "Measurement", "Param", "Target", "calibrate", "check_identifiable", "error", "held_out",
           "levenberg_marquardt", "profile_yaml", "read_collective_table", "read_models_csv",
           "read_ops", "write_profile"]
