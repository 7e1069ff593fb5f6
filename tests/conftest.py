import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="hardening: fuzz with a budget 10x larger, random (not derandomized) examples")
