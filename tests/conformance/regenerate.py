"""Regenerate the conformance corpus from real frameworks run offline with scripted models.

    .venv/bin/python tests/conformance/regenerate.py [--only CASE ...] [--list]

Each language's generators live under `gen/<lang>/`.  A language folder takes part in one
of two ways:
- `gen/<lang>/cases.py` defines `CASES: dict[str, Callable[[str], int]]` (case name ->
  a function that captures that case's payloads into `cases/<case>/payloads/` and returns
  how many it wrote); the folder is put on sys.path while it loads.
- `gen/<lang>/regenerate` (an executable) is run as `regenerate [--only CASE ...]` and
  `regenerate --list` prints its case names, one a line.
Every framework is installed at pinned versions by its generator into
`tests/conformance/.work/` (git ignores it).  truth.toml files are hand-written and never
rewritten here; a regenerated case keeps its truth because call ids and canaries are
scripted and deterministic.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

GEN = Path(__file__).resolve().parent / "gen"


def _python_style(folder: Path) -> dict[str, Callable[[str], int]]:
    spec = importlib.util.spec_from_file_location(f"gen_{folder.name}_cases", folder / "cases.py")
    assert spec is not None
    assert spec.loader is not None
    sys.path.insert(0, str(folder))
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    cases: dict[str, Callable[[str], int]] = module.CASES
    return cases


def _executable_style(folder: Path) -> dict[str, Callable[[str], int]]:
    script = folder / "regenerate"
    names = subprocess.run([str(script), "--list"], check=True, capture_output=True, text=True)

    def run(case: str) -> int:
        subprocess.run([str(script), "--only", case], check=True)
        return -1

    return dict.fromkeys(names.stdout.split(), run)


def generators() -> dict[str, Callable[[str], int]]:
    """Every case any language's generator knows, by name."""
    out: dict[str, Callable[[str], int]] = {}
    for folder in sorted(p for p in GEN.iterdir() if p.is_dir()):
        if (folder / "cases.py").is_file():
            out |= _python_style(folder)
        elif (folder / "regenerate").is_file():
            out |= _executable_style(folder)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="case names")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    known = generators()
    if args.list:
        print("\n".join(known))
        return 0
    wanted = args.only or list(known)
    unknown = [c for c in wanted if c not in known]
    if unknown:
        parser.error(f"no generator for {unknown}; known: {sorted(known)}")
    for case in wanted:
        written = known[case](case)
        print(f"{case}: {written if written >= 0 else 'done'} payloads", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
