"""Docs that are tested, as sqlite-utils does: what README.md and docs/ show is what the code does.

- Every ```python block of README.md and docs/*.md runs, offline (a connection to anything but
  loopback fails), in an empty folder; the blocks of one page run in order in one namespace, so a
  page may build on its earlier blocks. A block that cannot run here is marked on the line right
  above its fence, `<!-- not-run: the reason -->`, and the reason must be given.
- Every relative link of README.md, docs/, CHANGELOG.md and benchmarks/README.md reaches a file, and
  a heading when it names one.
- The generated references (docs/cli.md, docs/http.md, docs/mcp.md) match what docs/generate.py
  renders from the code now, and every CLI command, argument and option is in docs/cli.md.
- The README's reader's path (the ```bash blocks marked `<!-- reader-path -->`: set-up, a first
  memory, a first recall, a notebook through papermill) runs pasted into a fresh copy of the tree.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*(not-run|reader-path)\b(.*?)-->\s*$")
FENCE = re.compile(r"^```(\S*)")
# Secrets and endpoints the examples must not depend on: the docs run as a user without keys would run them.
SECRETS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "MNEMO_BASE_URL", "MNEMO_API_KEYS", "MNEMO_ARCHIVE",
           "MNEMO_DATA_DIR", "OSS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_ID")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: its language, code, first line and the marker right above it."""

    page: Path
    lang: str
    code: str
    line: int  # line number of the first code line
    marker: str  # "not-run", "reader-path" or ""
    reason: str  # what follows "not-run:"

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Return the fenced code blocks of `page` in order (markers are read from the line above each fence)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start = i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{i + 1}: a code fence is never closed"
        above = MARKER.match(lines[i - 1]) if i else None
        marker, reason = (above.group(1), above.group(2).strip().lstrip(":").strip()) if above else ("", "")
        out.append(Block(page, fence.group(1).lower(), "\n".join(lines[start:end]) + "\n", start + 1, marker, reason))
        i = end + 1
    return out


def markers(page: Path) -> list[tuple[int, str]]:
    """Return (line number, line) of every marker comment on `page`."""
    return [(n, line) for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if MARKER.match(line)]


def python_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang == "python" for b in blocks(p))]


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# ----------------------------------------------------------------- the pages and their markers
def test_the_docs_index_links_every_page():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in PAGES if p.parent.name == "docs" and p.name != "README.md" and f"({p.name}" not in index]
    assert not missing, f"docs/README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_marker_sits_on_a_fence_and_not_run_says_why(page):
    found = blocks(page)
    marked = {b.line - 2: b for b in found if b.marker}  # the fence is one line above the code
    for n, line in markers(page):
        assert n in marked, f"{_page_id(page)}:{n}: {line.strip()!r} must sit on the line right above a code fence"
    for b in found:
        if b.marker == "not-run":
            assert len(b.reason.split()) >= 3, (
                f"{b.where()}: say why the block cannot run, e.g. <!-- not-run: needs DASHSCOPE_API_KEY -->")
        if b.marker == "reader-path":
            assert b.lang in ("bash", "sh"), f"{b.where()}: the reader's path is shell commands"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """Return the anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Return the anchors of `page`'s headings (outside code blocks), numbered as GitHub numbers repeats."""
    seen: dict[str, int] = {}
    out, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            base = slug(line.lstrip("#"))
            out.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return out


@pytest.mark.parametrize("page", [*PAGES, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"], ids=_page_id)
def test_links_reach_a_file_and_a_heading(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{_page_id(page)}: " + "; ".join(broken)


# ----------------------------------------------------------------- the Python blocks run
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every connection that leaves the machine while the examples run."""
    real = socket.socket.connect

    def connect(sock: socket.socket, address):  # noqa: ANN001
        host = address[0] if isinstance(address, tuple) else None
        if host is not None:
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = host == "localhost"
            if not loopback:
                raise OSError(f"the docs examples must run offline; they tried to reach {address}")
        return real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.mark.parametrize("page", python_pages(), ids=_page_id)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)
    _offline(monkeypatch)
    namespace: dict = {"__name__": f"docs:{_page_id(page)}"}
    try:
        for b in blocks(page):
            if b.lang != "python" or b.marker == "not-run":
                continue
            # Padding keeps the page's own line numbers in a traceback.
            code = compile("\n" * (b.line - 1) + b.code, str(page), "exec")
            try:
                exec(code, namespace)
            except Exception as exc:
                raise AssertionError(f"{b.where()}: this block failed: {type(exc).__name__}: {exc}\n"
                                     f"{textwrap.indent(b.code, '    ')}") from exc
    finally:
        from mnemo import Memory

        for value in namespace.values():
            if isinstance(value, Memory):
                value.close()


# ----------------------------------------------------------------- the references are current
def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_references_are_current():
    diffs = _generator().stale()
    assert not diffs, ("stale: " + ", ".join(diffs) + "; run `make docs` (python docs/generate.py)\n"
                       + "\n".join(d[:3000] for d in diffs.values()))


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    nxt = text.find("\n## ", start + len(heading))
    return text[start: nxt if nxt >= 0 else len(text)]


def test_every_cli_command_and_option_is_in_the_reference():
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = _generator().cli_commands()
    assert len(commands) > 20
    for name, cmd, ctx in commands:
        assert f"\n## {name}\n" in reference, f"`{name}` has no section in docs/cli.md; run `make docs`"
        section = _section(reference, f"## {name}")
        assert (cmd.help or "").strip().splitlines()[0] in section, f"`{name}`: its help is not in docs/cli.md"
        for param in cmd.get_params(ctx):
            if param.hidden or param.name == "help":
                continue
            names = [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else [param.name]
            for opt in names:
                assert re.search(rf"`[^`]*(?<![\w-]){re.escape(opt)}(?![\w-])[^`]*`", section), (
                    f"`{name}`: {opt} is not in its section of docs/cli.md; run `make docs`")


# ----------------------------------------------------------------- the reader's path
def _tree_copy(dest: Path) -> None:
    """Copy the checkout's files as a fresh clone would hold them (tracked, plus new files not ignored)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the reader's path copies the tree with `git ls-files`: run it from a git checkout")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _fresh_install(clone: Path) -> None:
    """Make `clone/.venv` what `make setup` makes, without downloading: mnemo installed from the clone.

    The dependencies come from this interpreter's environment (a path file names its
    site-packages; PyPI is never asked). mnemo itself is installed from the clone as an editable
    install lays it out: a path file naming the clone, and the console scripts pyproject.toml
    declares, so `.venv/bin/mnemo` and every import run the clone's code. `.venv/.installed`
    then tells `make setup` it is done, as after a real install.
    """
    import site
    import tomllib

    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "_mnemo_clone.pth").write_text(f"{clone}\n")
    (purelib / "_mnemo_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    scripts = tomllib.loads((clone / "pyproject.toml").read_text())["project"]["scripts"]
    # papermill's console script belongs to a dependency, so it is made the same way.
    for name, target in {**scripts, "papermill": "papermill.__main__:papermill"}.items():
        module, _, func = target.partition(":")
        script = venv / "bin" / name
        script.write_text(f"#!{python}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
        script.chmod(0o755)
    (venv / ".installed").touch()


@pytest.mark.slow
def test_the_readers_path_works_in_a_fresh_clone(tmp_path):
    path = [b for b in blocks(ROOT / "README.md") if b.marker == "reader-path"]
    assert path, "README.md marks its reader's path with <!-- reader-path --> above its ```bash blocks"
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    clone = tmp_path / "mnemo"
    _tree_copy(clone)
    _fresh_install(clone)
    env = {k: v for k, v in os.environ.items() if k not in (*SECRETS, "PYTHONPATH", "VIRTUAL_ENV")}
    # Jupyter's user folders empty, as on a fresh machine: nothing registered beforehand.
    env.update({var: str(tmp_path / "jupyter" / sub) for var, sub in (
        ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"))})
    script = "set -euo pipefail\n" + "".join(b.code for b in path)
    res = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"the reader's path failed:\n{script}\n--- stdout\n{res.stdout[-3000:]}\n" \
                                f"--- stderr\n{res.stderr[-3000:]}"
    # What the README says the path shows: the correction is recalled, the notebook ran.
    assert "Lisbon" in res.stdout and "confidence:" in res.stdout, res.stdout[-3000:]
    assert (clone / "out.ipynb").exists()
    # And it was the clone's code that ran, not this checkout's.
    where = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c", "import mnemo; print(mnemo.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(clone), where
