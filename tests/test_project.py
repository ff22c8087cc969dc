"""The install a new user trusts: environment.yml agrees with pyproject, every CLI command has help."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
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


def _commands(group: click.Group, prefix: str = ""):
    for name, cmd in group.commands.items():
        yield f"{prefix}{name}", cmd
        if isinstance(cmd, click.Group):
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
            if isinstance(param, click.Option):
                assert (param.help or "").strip(), f"`mnemo {name}` option {param.name} has no help"
    assert {"add", "remember", "recall", "history", "forget", "stats", "demo"} <= set(names)
