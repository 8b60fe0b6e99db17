"""Regenerate the traceback golden inputs by running small programs in real runtimes.

    python tests/golden/tracebacks/generate.py            # inputs only (<case>.input.txt)
    python tests/golden/tracebacks/generate.py --expected # also rewrite the expected outputs
    python tests/golden/tracebacks/generate.py --expected-only # expected outputs of the inputs as they are

Each case runs a tiny program that fails (Python, Node.js, Java, Rust, and Go, Ruby, PHP when
their toolchains are installed) in a temporary directory under a fake home, and records what
the runtime printed. Some cases then wrap that output the way spans carry it: inside a JSON
string, after a log message, with CRLF line ends, or cut off by an attribute length limit.
Runtimes that are missing are skipped with a note; their existing inputs stay as they are.
.NET cannot be installed here, so `dotnet_*.input.txt` are hand-written in the format of
dotnet/runtime's `Exception.ToString()` and are not touched by this script.

Expected outputs are written with `--expected` and must be reviewed in the diff: they pin
what errscope keeps (`.expected.kept.txt`) and what humans see (`.expected.human.txt`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Fake key material that the human copy must not show (generated, not a real key).
FAKE_KEY = "sk_live_" + "errscopeFakeKeyForGoldenTests0001"

PY_SIMPLE = """
def load(job_id):
    jobs = {"17": "ok"}
    return jobs[job_id]

def handle(args):
    api_key = "FAKE_KEY"
    return load(args["job_id"])

handle({"job_id": "INV-17"})
""".replace("FAKE_KEY", FAKE_KEY)

PY_CHAINED = """
class ToolError(Exception):
    pass

def fetch(url):
    raise ConnectionError("connect to https://bob:hunter2pass@db.internal:5432 refused")

def call():
    try:
        fetch("x")
    except ConnectionError as exc:
        raise ToolError("fetch failed") from exc

try:
    call()
except ToolError:
    raise RuntimeError("tool crashed")
"""

PY_GROUP = """
def a():
    raise ValueError("bad job_id 17")

def b():
    raise TypeError("expected str")

errors = []
for f in (a, b):
    try:
        f()
    except Exception as exc:
        errors.append(exc)
raise ExceptionGroup("two tools failed", errors)
"""

PY_LOCALS = """
import traceback

def charge(card, token):
    amount = 17
    raise PermissionError("denied for token %s" % token)

try:
    charge("4111", "ghp_notreal")
except Exception as exc:
    te = traceback.TracebackException.from_exception(exc, capture_locals=True)
    print("".join(te.format()), end="")
"""

PY_MULTILINE = """
class ValidationError(ValueError):
    pass

raise ValidationError(
    "1 validation error for Args\\njob_id\\n  Input should be a valid integer "
    "[type=int_parsing, input_value='abc', input_type=str]"
)
"""

NODE_UNCAUGHT = """
function lookup(id) {
  const token = "FAKE_KEY";
  throw new TypeError("cannot read job " + id);
}
function handle(args) { return lookup(args.jobId); }
handle({ jobId: "INV-17" });
""".replace("FAKE_KEY", FAKE_KEY)

NODE_CAUSE = """
async function fetchRow() {
  const err = new Error("ECONNREFUSED 10.0.0.7:5432");
  err.code = "ECONNREFUSED";
  throw err;
}
async function tool() {
  try { await fetchRow(); }
  catch (e) { throw new Error("lookup failed", { cause: e }); }
}
tool().catch((e) => { console.error(e); process.exitCode = 1; });
"""

NODE_PROPS = """
const fs = require("fs");
fs.readFileSync(require("os").homedir() + "/secrets/missing.json");
"""

JAVA_CAUSED = """
public class Main {
    static class ToolException extends RuntimeException {
        ToolException(String m, Throwable c) { super(m, c); }
    }
    static int parse(String s) { return Integer.parseInt(s); }
    static int lookup(String id) {
        try { return parse(id); }
        catch (NumberFormatException e) { throw new ToolException("invalid job_id", e); }
    }
    public static void main(String[] args) { lookup("INV-17"); }
}
"""

RUST_PANIC = """
#[derive(Debug)]
struct Conn { url: String, password: Option<String> }
fn open(url: &str) -> Result<Conn, String> { Err(format!("refused {}", url)) }
fn main() {
    let c = open("postgres://app:hunter2pass@db:5432/app").unwrap();
    println!("{:?}", c);
}
"""

GO_PANIC = """
package main

func lookup(jobs []string, i int) string { return jobs[i] }

func main() {
	jobs := []string{"17"}
	_ = lookup(jobs, 5)
}
"""

GO_GOROUTINES = """
package main

import "time"

func worker(ch chan int) { <-ch }

func main() {
	ch := make(chan int)
	go worker(ch)
	time.Sleep(10 * time.Millisecond)
	var m map[string]int
	m["job"] = 17
}
"""

RUBY_ERROR = """
def lookup(id)
  raise ArgumentError, "no job #{id}"
end

def handle(args)
  lookup(args[:job_id])
end

handle({ job_id: "INV-17" })
"""

PHP_ERROR = """<?php
function lookup($id, $password) {
    throw new RuntimeException("no job " . $id);
}
function handle($args) { return lookup($args["job_id"], "hunter2pass"); }
handle(["job_id" => "INV-17"]);
"""


def _run(cmd: list[str], cwd: Path, env_extra: dict[str, str] | None = None) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "RUST_BACKTRACE": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "CARGO_HOME": os.environ.get("CARGO_HOME", str(Path.home() / ".cargo")),
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup")),
        "GOCACHE": str(cwd / ".gocache"),
        "GOPATH": str(cwd / "go"),
        "GOFLAGS": "-mod=mod",
    }
    env.update(env_extra or {})
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return proc.stderr or proc.stdout


def _python(source: str) -> Callable[[Path], str]:
    def run(home: Path) -> str:
        app = home / "agent" / "app"
        app.mkdir(parents=True, exist_ok=True)
        (app / "tools.py").write_text(source)
        return _run([sys.executable, str(app / "tools.py")], home)

    return run


def _node(source: str, name: str = "tools.js") -> Callable[[Path], str]:
    def run(home: Path) -> str:
        app = home / "agent" / "app"
        app.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(source)
        return _run(["node", str(app / name)], home)

    return run


def _java(home: Path) -> str:
    src = home / "agent" / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "Main.java").write_text(JAVA_CAUSED)
    _run(["javac", "-d", str(home / "classes"), str(src / "Main.java")], home)
    return _run(["java", "-cp", str(home / "classes"), "Main"], home)


def _rust(backtrace: bool) -> Callable[[Path], str]:
    def run(home: Path) -> str:
        src = home / "agent" / "src"
        src.mkdir(parents=True, exist_ok=True)
        (src / "main.rs").write_text(RUST_PANIC)
        binary = home / "tool"
        _run(["rustc", "-g", "-o", str(binary), str(src / "main.rs")], home)
        return _run([str(binary)], home, {"RUST_BACKTRACE": "1" if backtrace else "0"})

    return run


def _go(source: str, *, traceback_all: bool = False) -> Callable[[Path], str]:
    def run(home: Path) -> str:
        src = home / "agent"
        src.mkdir(parents=True, exist_ok=True)
        (src / "main.go").write_text(source)
        env = {"GOTRACEBACK": "all"} if traceback_all else {}
        return _run(["go", "run", str(src / "main.go")], home, env)

    return run


def _script(command: str, source: str, name: str) -> Callable[[Path], str]:
    def run(home: Path) -> str:
        app = home / "agent" / "app"
        app.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(source)
        return _run([command, str(app / name)], home)

    return run


def _in_json(text: str) -> str:
    return json.dumps({"error": {"type": "tool_error", "stacktrace": text}, "attempt": 2})


def _after_log(text: str) -> str:
    return (
        "2026-11-30T09:00:00Z ERROR tool lookup_job failed (call_id=call_8Xk2, job INV-17): "
        + text
        + "2026-11-30T09:00:01Z INFO retry scheduled\n"
    )


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _cut(text: str) -> str:
    # An attribute length limit cuts the trace in the middle of a frame.
    return text[: max(40, int(len(text) * 0.6))]


CASES: dict[str, tuple[str, Callable[[Path], str], Callable[[str], str] | None]] = {
    "python_simple": ("python3", _python(PY_SIMPLE), None),
    "python_chained": ("python3", _python(PY_CHAINED), None),
    "python_group": ("python3", _python(PY_GROUP), None),
    "python_locals": ("python3", _python(PY_LOCALS), None),
    "python_multiline_message": ("python3", _python(PY_MULTILINE), None),
    "python_in_json": ("python3", _python(PY_SIMPLE), _in_json),
    "python_after_log": ("python3", _python(PY_CHAINED), _after_log),
    "python_crlf": ("python3", _python(PY_SIMPLE), _crlf),
    "python_truncated": ("python3", _python(PY_CHAINED), _cut),
    "node_uncaught": ("node", _node(NODE_UNCAUGHT), None),
    "node_cause": ("node", _node(NODE_CAUSE), None),
    "node_error_props": ("node", _node(NODE_PROPS), None),
    "node_in_json": ("node", _node(NODE_CAUSE), _in_json),
    "java_caused_by": ("java", _java, None),
    "java_after_log_crlf": ("java", _java, lambda t: _crlf(_after_log(t))),
    "java_truncated": ("java", _java, _cut),
    "rust_panic": ("rustc", _rust(backtrace=False), None),
    "rust_backtrace": ("rustc", _rust(backtrace=True), None),
    "rust_in_json": ("rustc", _rust(backtrace=False), _in_json),
    "go_panic": ("go", _go(GO_PANIC), None),
    "go_goroutines": ("go", _go(GO_GOROUTINES, traceback_all=True), None),
    "ruby_error": ("ruby", _script("ruby", RUBY_ERROR, "tools.rb"), None),
    "php_uncaught": ("php", _script("php", PHP_ERROR, "tools.php"), None),
}


def main(argv: list[str]) -> int:
    """Regenerate the inputs (and with --expected, the expected outputs)."""
    write_expected = "--expected" in argv or "--expected-only" in argv
    for case, (tool, produce, wrap) in CASES.items():
        if "--expected-only" in argv:
            break
        if shutil.which(tool) is None:
            print(f"skip {case}: {tool} is not installed", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="home-") as tmp:
            # A fake home under a fake user name, so the inputs carry absolute paths and a
            # user name exactly as real services print them.
            home = Path(tmp) / "home" / "alice"
            home.mkdir(parents=True)
            output = produce(home)
            output = output.replace(tmp, "")  # keep the inputs stable across runs
        if wrap is not None:
            output = wrap(output)
        (HERE / f"{case}.input.txt").write_bytes(output.encode("utf-8"))
        print(f"wrote {case}.input.txt ({len(output)} chars)")
    if write_expected:
        sys.path.insert(0, str(HERE.parents[2]))
        from errscope.collector.scrub import redact_traceback, strip_traceback

        for path in sorted(HERE.glob("*.input.txt")):
            case = path.name.removesuffix(".input.txt")
            text = path.read_bytes().decode("utf-8")
            kept, _ = strip_traceback(text)
            human = redact_traceback(text)
            (HERE / f"{case}.expected.kept.txt").write_bytes(kept.encode("utf-8"))
            (HERE / f"{case}.expected.human.txt").write_bytes(
                (human.text if human else "").encode("utf-8")
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
