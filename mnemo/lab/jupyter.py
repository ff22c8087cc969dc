"""JupyterLab on the notebooks, on this environment's own kernel: `make lab`, or `mnemo lab`.

    os.execv(*lab_command("notebooks"))  # what `mnemo lab` does

The notebooks name the standard `python3` kernel in their metadata, the one ipykernel installs
into every environment it is installed in. Jupyter runs a `python3` kernel whose command is
plain `python` on the interpreter of the process that starts it (jupyter_client replaces it with
`sys.executable`), and inside a virtualenv or conda environment it prefers that environment's
kernelspecs to the user's. So JupyterLab started from the environment mnemo is installed in (what
`mnemo lab` does) opens them on that interpreter, and `papermill notebooks/00_quickstart.ipynb
out.ipynb` works right after `pip install -e .`, with nothing registered first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError

KERNEL_NAME = "python3"  # what the notebooks' metadata names: the environment's own ipykernel
KERNEL_DISPLAY = "Python 3 (ipykernel)"  # what JupyterLab shows in the launcher and the notebook toolbar


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
