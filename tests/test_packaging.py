"""The wheel: one import root, `errscope`, installable beside PyPI's `queries` and `collector`.

Earlier releases installed top-level `collector`, `queries` and `dashboards` modules, so
installing errscope beside the PyPI packages of those names broke one of them.  These tests
build the real wheel, install it into a fresh virtualenv next to both PyPI packages and
import each from where it belongs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# Run inside the fresh virtualenv: where each import root comes from, and that the data files
# errscope reads at run time are inside the installed package.
_PROBE = """
import importlib.util, json
from importlib import resources
import errscope, errscope.collector, errscope.queries, errscope.dashboards
def where(name):
    spec = importlib.util.find_spec(name)  # pycollector is a namespace package: no origin
    return spec.origin or list(spec.submodule_search_locations)[0] + "/"
out = {
    name: where(name)
    for name in ("errscope", "errscope.collector", "errscope.queries", "errscope.dashboards",
                 "queries", "pycollector")
}
out["catalog"] = resources.files("errscope.collector").joinpath("catalog.toml").is_file()
out["sql"] = sorted(p.name for p in resources.files("errscope.queries").iterdir()
                    if p.name.endswith(".sql"))
out["all"] = errscope.__all__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """errscope's wheel, built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("errscope-*.whl")
    return built


def test_the_wheel_installs_one_import_root(wheel: Path) -> None:
    """Every module in the wheel lives under errscope/; nothing claims collector/ or queries/."""
    names = zipfile.ZipFile(wheel).namelist()
    roots = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert roots == {"errscope"}
    assert "errscope/collector/catalog.toml" in names
    assert any(n.startswith("errscope/dashboards/app_pages/") for n in names)
    assert any(n.endswith(".sql") and "/migrations/" in n for n in names)
    assert "errscope/collector/watch/state.sql" in names  # `errscope watch` reads it at start


def test_installs_beside_the_pypi_packages_named_queries_and_collector(
    wheel: Path, tmp_path: Path
) -> None:
    """In one fresh virtualenv, errscope, PyPI's `queries` and `collector` each import as themselves."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    # --no-deps: what is under test is who owns which import name, not the libraries' own
    # dependencies (queries would build psycopg2 from source).
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            str(wheel),
            "queries",
            "collector",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    probe = subprocess.run(
        [str(python), "-c", _PROBE],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # not the checkout, whose errscope/ folder would shadow the install
    )
    found = json.loads(probe.stdout)
    site = str(env)
    for name in ("errscope", "errscope.collector", "errscope.queries", "errscope.dashboards"):
        assert found[name].startswith(site), (name, found[name])
        assert f"/errscope/{name.split('.')[-1]}" in found[name] or name == "errscope"
    assert "/site-packages/queries/" in found["queries"], found["queries"]
    assert "/site-packages/pycollector/" in found["pycollector"], found["pycollector"]
    assert found["catalog"] is True
    assert "error_rates.sql" in found["sql"]
    assert {"instrument", "tool", "PositiveInt", "NotFound"} <= set(found["all"])
