"""The go cases for tests/conformance/regenerate.py; gen/polyglot.py does the work."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from polyglot import cases_for

CASES = cases_for("go")
