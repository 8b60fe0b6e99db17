"""errscope.toml: validated once, weighed under env and flags, shown with its sources, read by serve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from errscope.collector.config import Matcher, load_file
from errscope.collector.errors import ConfigError, ConfigErrorKind
from tests.sidecar.harness import finished_spans, http_exporter, send, sidecar

ERRSCOPE = [sys.executable, "-m", "errscope.collector.cli"]
KNOWN = {"serve": frozenset({"store", "otlp_grpc", "catalog"}), "check": frozenset({"codes"})}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ERRSCOPE_")}
    return subprocess.run(
        [*ERRSCOPE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "kind", "where"),
    [
        pytest.param("[serve\n", ConfigErrorKind.BAD_TOML, None, id="bad-toml"),
        pytest.param(
            "[serv]\nstore = 'x'\n", ConfigErrorKind.UNKNOWN_KEY, "serv", id="unknown-table"
        ),
        pytest.param(
            "[serve]\notlp_grcp = 'x'\n", ConfigErrorKind.UNKNOWN_KEY, "serve.otlp_grcp", id="typo"
        ),
        pytest.param("serve = 3\n", ConfigErrorKind.BAD_VALUE, "serve", id="table-not-table"),
        pytest.param(
            "[[matchers]]\ntool_attribute = 'a'\n",
            ConfigErrorKind.BAD_VALUE,
            "matchers[0].name_glob",
            id="matcher-matching-nothing",
        ),
        pytest.param(
            "[[matchers]]\nname_glob = 'x'\nequals = { a = 1 }\n",
            ConfigErrorKind.BAD_VALUE,
            "matchers[0].equals",
            id="matcher-equals-not-text",
        ),
        pytest.param(
            "[[matchers]]\nname_glob = 'x'\nnames = 'y'\n",
            ConfigErrorKind.UNKNOWN_KEY,
            "matchers[0].names",
            id="matcher-unknown-key",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_table_and_key(
    tmp_path: Path, text: str, kind: ConfigErrorKind, where: str | None
) -> None:
    """Each malformed file is one ConfigError of its kind, naming the table and key."""
    path = tmp_path / "errscope.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_file(path, KNOWN)
    assert caught.value.kind == kind
    if where is not None:
        assert f" {where}:" in caught.value.describe()


def test_a_good_file_gives_tables_and_matchers(tmp_path: Path) -> None:
    """Tables keep their values; [[matchers]] become Matcher rules in order."""
    path = tmp_path / "errscope.toml"
    path.write_text(
        '[serve]\nstore = "a.duckdb"\ncatalog = ["c.toml"]\n'
        '[[matchers]]\nname_glob = "tool:*"\nequals = { kind = "tool" }\n'
        '[[matchers]]\nequals = { "app.kind" = "tool" }\ntool_attribute = "app.tool"\n'
    )
    file = load_file(path, KNOWN)
    assert file.tables == {"serve": {"store": "a.duckdb", "catalog": ["c.toml"]}}
    assert file.matchers == (
        Matcher(name_glob="tool:*", equals=(("kind", "tool"),)),
        Matcher(equals=(("app.kind", "tool"),), tool_attribute="app.tool"),
    )
    assert file.matchers[0].matches("tool:lookup", {"kind": "tool"})
    assert not file.matchers[0].matches("tool:lookup", {"kind": ""})


def test_the_file_never_echoes_a_value(tmp_path: Path) -> None:
    """A refused value (it may be a token) is named by its key, never repeated."""
    path = tmp_path / "errscope.toml"
    path.write_text('[serve]\ntoken = "s3cr3t-token-value-123456"\nmax_body_bytes = "lots"\n')
    result = _run("config", "--check", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error[bad_value] serve.max_body_bytes:")
    assert "s3cr3t" not in result.stderr + result.stdout
    assert "lots" not in result.stderr


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            "[serve]\notlp_grcp = 'x'\n", "error[unknown_key] serve.otlp_grcp:", id="typo"
        ),
        pytest.param("[check]\nservice = 5\n", None, id="good-int-as-text"),
        pytest.param(
            "[serve]\ncatalog = 'one.toml'\n", "error[bad_value] serve.catalog:", id="list"
        ),
    ],
)
def test_config_check_is_one_line(tmp_path: Path, text: str, line: str | None) -> None:
    """`errscope config --check` exits 0 on a valid file and 2 with one error line otherwise."""
    path = tmp_path / "errscope.toml"
    path.write_text(text)
    result = _run("config", "--check", str(path))
    if line is None:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"ok: {path}")
    else:
        assert result.returncode == 2
        assert result.stderr.startswith(line)
        assert len(result.stderr.strip().splitlines()) == 1


def test_show_weighs_flags_env_file_and_defaults(tmp_path: Path) -> None:
    """--show: the file over the default, ERRSCOPE_* over the file; a token is ****, a password masked."""
    path = tmp_path / "errscope.toml"
    path.write_text(
        '[serve]\notlp_grpc = "127.0.0.1:14317"\nstore = "from-file.duckdb"\n'
        'token = "a-token-of-sixteen-chars"\n'
        '[dashboard]\napi = "http://user:hunter2pass@127.0.0.1:4320"\n'
    )
    result = _run(
        "config",
        "--show",
        env={"ERRSCOPE_CONFIG": str(path), "ERRSCOPE_STORE": "from-env.duckdb"},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"otlp_grpc = 127.0.0.1:14317    (file {path})" in out
    assert "store = from-env.duckdb    (env ERRSCOPE_STORE)" in out
    assert "otlp_http = 127.0.0.1:4318    (default)" in out
    assert "token = ****" in out
    assert "a-token-of-sixteen" not in out
    assert "hunter2pass" not in out
    assert "[findings]" in out


def test_a_bad_file_stops_a_command_before_it_starts(tmp_path: Path) -> None:
    """`errscope serve --config BAD` stops with one line and exit 2, and creates no store."""
    path = tmp_path / "errscope.toml"
    path.write_text("[serve]\nmax_body_bytes = 'lots'\n")
    store = tmp_path / "never.duckdb"
    result = _run("serve", "--config", str(path), "--store", str(store))
    assert result.returncode == 2
    assert result.stderr.startswith("error[bad_value] serve.max_body_bytes:")
    assert not store.exists()


def test_serve_reads_its_table_and_the_users_matchers(tmp_path: Path) -> None:
    """A real sidecar takes its limits from the file, and stores a span only a user matcher knows."""
    path = tmp_path / "errscope.toml"
    path.write_text(
        "[serve]\nmax_inflight_bytes = 33554432\n"
        '[[matchers]]\nname_glob = "lookup *"\nequals = { "app.kind" = "tool" }\n'
        'tool_attribute = "app.tool"\n'
    )
    store = tmp_path / "s.duckdb"
    spans = finished_spans(
        [
            ("lookup order", {"app.kind": "tool", "app.tool": "find_order"}),
            ("lookup order", {"app.kind": "other"}),  # the matcher's equals does not hold
        ],
        {"service.name": "shop-agent", "service.version": "2.0.0"},
    )
    with sidecar(store, "--config", str(path)) as served:
        assert send(http_exporter(served), spans)
        assert served.terminate() == 0
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("SELECT tool, convention, code FROM tool_calls").fetchall()
    con.close()
    assert rows == [("find_order", "custom", "ok")]
