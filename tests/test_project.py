"""The install a new user trusts: environment.yml agrees with pyproject, every CLI command has help."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.main import get_command
from typer.testing import CliRunner

from mnemo.cli import app

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_installs_pyproject_with_all_extras():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ['-e ".[all]"'] or pip == ["-e .[all]"]
    assert project["requires-python"] == ">=3.11"
    extras = project["optional-dependencies"]
    everything = extras["all"][0]
    named = everything[everything.index("[") + 1: everything.index("]")].split(",")
    assert set(named) == set(extras) - {"all"}, "the 'all' extra must name every other extra"


def test_jupyterlab_comes_with_the_notebooks_extra_and_the_conda_env():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("jupyterlab") for d in extras["notebooks"])
    assert any(d.startswith("nbconvert") for d in extras["notebooks"])
    deps = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    assert any(isinstance(d, str) and d.startswith("jupyterlab") for d in deps)


def _data_dir_make_exports(checkout: Path, env: dict[str, str]) -> str:
    """Return MNEMO_DATA_DIR as the Makefile's recipes see it, in a copy of the Makefile at `checkout`."""
    checkout.mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", checkout)
    res = subprocess.run(["make", "--no-print-directory", "--eval", "show-data-dir: ; @echo \"[$$MNEMO_DATA_DIR]\"",
                          "show-data-dir"], cwd=checkout, env=env, capture_output=True, text=True, check=True)
    return res.stdout.strip()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_points_at_the_shared_data_only_when_it_exists(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_DATA_DIR"}
    assert _data_dir_make_exports(tmp_path / "lone" / "mnemo", env) == "[]"
    (tmp_path / "dev" / "shared" / "data").mkdir(parents=True)
    assert _data_dir_make_exports(tmp_path / "dev" / "mnemo", env) == f"[{tmp_path / 'dev' / 'shared' / 'data'}]"
    # A folder the user chose wins over the shared one.
    chosen = _data_dir_make_exports(tmp_path / "dev" / "other", {**env, "MNEMO_DATA_DIR": "/data/mine"})
    assert chosen == "[/data/mine]"


def _commands(group, prefix: str = ""):
    # Typer vendors its own click, so a group is told by its subcommands, not by click.Group
    # (which missed every `serve`, `archive` and `data` subcommand).
    for name, cmd in group.commands.items():
        yield f"{prefix}{name}", cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, f"{prefix}{name} ")


def test_every_cli_command_has_help():
    root = get_command(app)
    runner = CliRunner()
    names = []
    for name, cmd in _commands(root):
        names.append(name)
        assert (cmd.help or "").strip(), f"`mnemo {name}` has no help text"
        res = runner.invoke(app, [*name.split(), "--help"])
        assert res.exit_code == 0, res.output
        assert "Usage" in res.output
        for param in cmd.params:
            if param.param_type_name == "option":
                assert (param.help or "").strip(), f"`mnemo {name}` option {param.name} has no help"
    assert {"add", "remember", "recall", "history", "forget", "stats", "demo"} <= set(names)
