"""JupyterLab on the notebooks, on the project's own kernel: `make lab`, or `mnemo lab`.

    register_kernel()                    # "Python (mnemo)": this interpreter, in this environment
    os.execv(*lab_command("notebooks"))  # what `mnemo lab` does after registering

The notebooks name the kernel `mnemo` in their metadata, so JupyterLab opens them on it: the
interpreter mnemo is installed in, whatever other Pythons the machine has. The kernel is
registered into this environment (`<sys.prefix>/share/jupyter/kernels/mnemo`), never into the
user's home, so removing the environment removes it too. Headless runs (`mnemo run`) do not
need it: they name the environment's own `python3` kernel.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigError

KERNEL_NAME = "mnemo"  # what the notebooks' metadata names
KERNEL_DISPLAY = "Python (mnemo)"  # what JupyterLab shows in the launcher and the notebook toolbar


def register_kernel(prefix: str | Path | None = None) -> Path:
    """Register this interpreter as the Jupyter kernel "Python (mnemo)" under `prefix` (default: this environment).

    Returns the kernelspec folder. Registering again replaces the earlier spec.
    """
    try:
        from ipykernel.kernelspec import install
    except ImportError as exc:
        raise ConfigError("ipykernel is not installed: pip install -e '.[notebooks]'") from exc
    return Path(install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY, prefix=str(prefix or sys.prefix)))


def lab_command(notebooks: str | Path, *, port: int | None = None, token: str | None = None,
                open_browser: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """Return the command line that serves JupyterLab on `notebooks`, on loopback only.

    Offline by default: JupyterLab neither fetches its news feed nor asks PyPI for a newer
    version. `port` None lets Jupyter pick a free one; `token` None lets it make one (printed
    in the URL it shows).
    """
    folder = Path(notebooks).resolve()
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder of notebooks; run from the checkout or pass --notebooks")
    try:
        import jupyterlab  # noqa: F401
    except ImportError as exc:
        raise ConfigError("JupyterLab is not installed: pip install -e '.[notebooks]'") from exc
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}", "--ServerApp.ip=127.0.0.1",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        cmd.append("--no-browser")
    # Jupyter refuses to start as root unless told to; containers and the build machines run as root.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return [*cmd, *extra]
