"""JupyterLab as a newcomer opens it: `mnemo lab` (what `make lab` runs) serves the notebooks on loopback
on the environment's own python3 kernel, and the quickstart runs there end to end in a real browser.

The browser is Debian's chromium driven by Playwright, as in the explorer's test. Without them the
test skips locally and FAILS under CI (CI=true). `MNEMO_SCREENSHOTS=docs/screenshots pytest
tests/test_lab.py` refreshes docs/screenshots/jupyterlab.png (otherwise it goes to tmp_path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import require_chromium

from mnemo.errors import ConfigError
from mnemo.lab.jupyter import KERNEL_DISPLAY, KERNEL_NAME, lab_command

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "mnemo-lab-test-token-0123456789"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_lab(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 120.0) -> None:
    """Return once the server answers /api/status; fail with its log if it exits or never answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"`mnemo lab` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/api/status", params={"token": TOKEN}, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer in {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def test_lab_command_stays_on_loopback_and_offline(tmp_path):
    cmd = lab_command(tmp_path, port=8890, token="t", open_browser=False)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert "--ServerApp.ip=127.0.0.1" in cmd and f"--ServerApp.root_dir={tmp_path.resolve()}" in cmd
    assert "--LabApp.news_url=None" in cmd and "--no-browser" in cmd and "--ServerApp.port_retries=0" in cmd
    with pytest.raises(ConfigError, match="not a folder"):
        lab_command(tmp_path / "missing")


def test_the_notebooks_open_on_the_environments_own_kernel():
    # python3 is the kernel ipykernel installs into every environment, so papermill and JupyterLab find it
    # right after `pip install -e .`; a kernel only `make lab` registered broke `papermill NOTEBOOK OUT`.
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        spec = json.loads(path.read_text())["metadata"]["kernelspec"]
        assert (spec["name"], spec["display_name"]) == (KERNEL_NAME, KERNEL_DISPLAY), path.name


def test_quickstart_runs_in_jupyterlab_in_a_real_browser(tmp_path):
    binary = require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("MNEMO_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    # A copy of the quickstart: run from JupyterLab it writes results.json and its figure beside itself.
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_quickstart.ipynb", notebooks)
    # Jupyter's own folders (config, runtime, settings, workspaces) in tmp_path: the user's are not touched.
    env = {**os.environ, **{var: str(tmp_path / "jupyter" / sub) for var, sub in (
        ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"))}}
    # JupyterLab asks once whether to fetch its news feed; answered no, as an offline user would.
    news = tmp_path / "jupyter" / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mnemo.cli", "lab", "--notebooks", str(notebooks), "--port",
                                 str(port), "--token", TOKEN, "--no-browser"], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path, start_new_session=True)
    try:
        _wait_for_lab(proc, url, log)
        # The environment's python3 kernel is there with nothing registered, and it runs this interpreter:
        # its command is plain `python`, which Jupyter replaces with the server's own interpreter.
        specs = httpx.get(f"{url}/api/kernelspecs", params={"token": TOKEN}, timeout=10).json()["kernelspecs"]
        assert specs[KERNEL_NAME]["spec"]["display_name"] == KERNEL_DISPLAY
        argv0 = specs[KERNEL_NAME]["spec"]["argv"][0]
        assert argv0 in ("python", "python3") or Path(argv0).resolve() == Path(sys.executable).resolve(), argv0

        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"), executable_path=binary, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1000})
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                expect.set_options(timeout=60_000)
                page.goto(f"{url}/lab/tree/00_quickstart.ipynb?token={TOKEN}")
                panel = page.locator(".jp-NotebookPanel").first
                expect(panel).to_be_visible()
                # The notebook's metadata names the python3 kernel; the toolbar shows it once it is up.
                expect(panel.locator(".jp-Toolbar-kernelName")).to_have_text(KERNEL_DISPLAY)
                expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1)

                page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
                page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()

                # Every code cell ran, in order, and none is still running.
                prompts = panel.locator(".jp-CodeCell .jp-InputArea-prompt")
                count = prompts.count()
                assert count == 12, count
                expect(prompts.nth(count - 1)).to_have_text(f"[{count}]:", timeout=240_000)
                expect(panel.locator(".jp-InputArea-prompt", has_text="[*]")).to_have_count(0)
                assert panel.locator("[data-mime-type='application/vnd.jupyter.error']").count() == 0
                # Its output appears: the correction superseded Berlin, recall is certain, the figure is drawn.
                outputs = panel.locator(".jp-OutputArea-output")
                expect(outputs.filter(has_text="confidence: certain")).to_have_count(1)
                expect(outputs.filter(has_text="Lisbon").first).to_be_visible()
                expect(panel.locator(".jp-RenderedImage img")).to_have_count(1)
                assert not errors, errors

                outputs.filter(has_text="confidence: certain").scroll_into_view_if_needed()
                page.mouse.wheel(0, -220)
                page.wait_for_timeout(500)
                page.screenshot(path=str(shots / "jupyterlab.png"))
            finally:
                browser.close()
    finally:
        # SIGTERM: the server shuts its kernels down before it exits.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # The kernel ran in the notebook's folder and recorded what it found, as in a headless run.
    results = json.loads((notebooks / "results.json").read_text())
    assert results["recall_confidence"] == "certain" and results["superseded"] == 1
    assert results["dry_run_matches_forget"] is True and (notebooks / "statuses.png").exists()
