import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="hardening: fuzz with a budget 10x larger, random (not derandomized) examples")


# every pass checks its ensures in the tests (and in the CLI runs they start)
os.environ["GRAPHEXEC_CHECK"] = "1"
import graphexec.passes.base  # noqa: E402

graphexec.passes.base.CHECK_CONTRACTS = True
