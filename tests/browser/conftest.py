"""Browser tests reuse the black-box server helper of tests/e2e."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
