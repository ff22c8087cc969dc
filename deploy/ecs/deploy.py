#!/usr/bin/env python3
"""Deploy the mnemo service to Alibaba Cloud ECS: render the files, create or update the instance, or roll out over ssh.

    python deploy/ecs/deploy.py render --config deploy/ecs/deploy.example.yaml --out build/ecs
    python deploy/ecs/deploy.py ecs    --config my.yaml --dry-run     # print the ECS API requests
    python deploy/ecs/deploy.py ssh    --config my.yaml --host ecs-user@203.0.113.7 --dry-run

Templates live in deploy/ecs/templates (string.Template, `$name`; a missing value is an
error). `render` writes mnemo.service, rollout.sh and user-data.yaml. `ecs` looks the
instance up by name with the ECS SDK (alibabacloud-ecs20140526): none -> RunInstances with
the cloud-init user-data; one -> RunCommand (Cloud Assistant) with the rollout script.
`ssh` writes the secrets file and runs the same rollout script over ssh. Every command
takes --dry-run, which makes no call and changes nothing, and prints exactly what would
be sent or run, secrets redacted.

Secrets come only from the environment: ALIBABA_CLOUD_ACCESS_KEY_ID and
ALIBABA_CLOUD_ACCESS_KEY_SECRET for the ECS API; the variables named in `env_keys`
(MNEMO_API_KEYS, DASHSCOPE_API_KEY, ...) become /etc/mnemo/mnemo.env on the instance,
and only `ssh` sends them. User-data never holds a secret.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from string import Template

import yaml

TEMPLATES = Path(__file__).resolve().parent / "templates"
SAFE = re.compile(r"^[A-Za-z0-9_.,:/@+=\[\]-]+$")  # values that go into shell and unit lines unquoted


class DeployError(Exception):
    """The deploy cannot go ahead as configured; the message says what to change."""


@dataclass(frozen=True)
class Settings:
    """Everything a deploy needs except secrets. Loaded from YAML; unknown keys are errors."""

    region: str = "cn-hangzhou"  # ECS region id
    instance_name: str = "mnemo-1"  # the instance is found by this name (and tagged with it)
    image_id: str = ""  # an Ubuntu 24.04 or Debian 12 image (Python >= 3.11 with apt)
    instance_type: str = "ecs.g7.large"  # 2 vCPU, 8 GiB
    security_group_id: str = ""  # must allow ssh from the operator and `port` only from clients
    vswitch_id: str = ""  # the VPC switch the instance joins
    key_pair_name: str = ""  # ssh key pair registered in the region
    system_disk_gb: int = 40  # cloud_essd system disk
    internet_max_bandwidth_out: int = 0  # Mbit/s of public bandwidth; 0 = no public IP
    package: str = "mnemo-ltm[server]==0.1.0"  # what pip installs on the instance
    protocol: str = "http"  # http (`mnemo serve http`) | mcp (`mnemo serve mcp --transport http`)
    bind: str = "127.0.0.1"  # interface the service listens on; 0.0.0.0 only behind a security group and TLS
    port: int = 8080  # the service's port
    store_dir: str = "/var/lib/mnemo"  # stores live here (one per tenant for http)
    venv: str = "/opt/mnemo/venv"  # virtualenv mnemo is installed into
    user: str = "mnemo"  # system user the service runs as
    env_file: str = "/etc/mnemo/mnemo.env"  # secrets file read by the unit; written only by `ssh`
    env_keys: tuple[str, ...] = field(default=("MNEMO_API_KEYS", "DASHSCOPE_API_KEY"))  # copied from the environment

    @classmethod
    def load(cls, path: str | Path | None, **overrides: object) -> Settings:
        """Read YAML settings (None: defaults), apply overrides, and validate every value."""
        data = yaml.safe_load(Path(path).read_text()) if path else {}
        data = {**(data or {}), **{k: v for k, v in overrides.items() if v is not None}}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DeployError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "env_keys" in data:
            data["env_keys"] = tuple(data["env_keys"])
        settings = cls(**data)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise DeployError for a value that could break the unit, the YAML or the shell script."""
        if self.protocol not in ("http", "mcp"):
            raise DeployError(f"protocol must be http or mcp, not {self.protocol!r}")
        if not 0 < int(self.port) < 65536:
            raise DeployError(f"port must be 1-65535, not {self.port}")
        for name in ("store_dir", "venv", "env_file"):
            value = getattr(self, name)
            if not value.startswith("/") or not SAFE.match(value):
                raise DeployError(f"{name} must be an absolute path of plain characters, not {value!r}")
        for name in ("region", "instance_name", "bind", "user"):
            if not SAFE.match(str(getattr(self, name))):
                raise DeployError(f"{name} has characters that are unsafe in a unit or shell line: {getattr(self, name)!r}")
        # The package spec is single-quoted in the rollout script, so only a quote or a newline could break out.
        if not self.package or re.search(r"['\n\\]", self.package):
            raise DeployError(f"package must be a pip requirement without quotes or newlines, not {self.package!r}")
        for key in self.env_keys:
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
                raise DeployError(f"env_keys entry {key!r} is not an environment variable name")


def _template(name: str, values: dict[str, object]) -> str:
    return Template((TEMPLATES / name).read_text()).substitute(values)


def _indent(text: str, spaces: int) -> str:
    return "\n".join((" " * spaces + line) if line else "" for line in text.rstrip("\n").split("\n"))


def exec_start(s: Settings) -> str:
    """Return the unit's ExecStart line for the configured protocol."""
    if s.protocol == "http":
        return f"{s.venv}/bin/mnemo serve http --store-dir {s.store_dir} --host {s.bind} --port {s.port}"
    return (f"{s.venv}/bin/mnemo serve mcp --store {s.store_dir}/mnemo.duckdb --transport http "
            f"--host {s.bind} --port {s.port}")


def render_unit(s: Settings) -> str:
    """Return the systemd unit for the service."""
    return _template("mnemo.service.tmpl", {**asdict(s), "exec_start": exec_start(s)})


def render_rollout(s: Settings) -> str:
    """Return the idempotent install-or-upgrade script (first boot, ssh and Cloud Assistant all run it)."""
    # HTTP has a health route; MCP's endpoint only needs to answer at all.
    check = (f"curl -fsS -o /dev/null http://127.0.0.1:{s.port}/healthz" if s.protocol == "http"
             else f"curl -sS -o /dev/null http://127.0.0.1:{s.port}/mcp")
    return _template("rollout.sh.tmpl", {**asdict(s), "unit": render_unit(s).rstrip("\n"), "health_check": check,
                                         "env_dir": str(Path(s.env_file).parent)})


def render_user_data(s: Settings) -> str:
    """Return the cloud-init user-data (#cloud-config): a user, packages, the rollout script, run once."""
    return _template("user-data.yaml.tmpl", {**asdict(s), "rollout_indented": _indent(render_rollout(s), 6)})


def env_file(s: Settings, environ: dict[str, str]) -> tuple[str, list[str]]:
    """Return the secrets file built from the environment, and the names of `env_keys` that are unset."""
    present = [k for k in s.env_keys if environ.get(k)]
    for key in present:
        if "\n" in environ[key]:
            raise DeployError(f"{key} contains a newline, which an EnvironmentFile cannot hold")
    body = "".join(f"{k}={environ[k]}\n" for k in present)
    return body, [k for k in s.env_keys if k not in present]


def redacted(s: Settings, environ: dict[str, str]) -> str:
    return "".join(f"{k}=<redacted, {len(environ[k])} chars from ${k}>\n" for k in s.env_keys if environ.get(k))


# ----------------------------------------------------------------- ECS SDK
def ecs_requests(s: Settings) -> dict[str, object]:
    """Return the ECS SDK requests this deploy makes: a lookup, then create (none found) or update (one found)."""
    from alibabacloud_ecs20140526 import models as ecs

    user_data = render_user_data(s)
    if len(base64.b64encode(user_data.encode())) > 32_768:
        raise DeployError("the rendered user-data is over ECS's 32 KB limit once base64-encoded; shorten the templates")
    describe = ecs.DescribeInstancesRequest(region_id=s.region, instance_name=s.instance_name, page_size=10)
    # A ClientToken makes a retried RunInstances return the first instance instead of creating a second one.
    token = hashlib.sha256(f"{s.region}|{s.instance_name}|{user_data}".encode()).hexdigest()[:32]
    create = ecs.RunInstancesRequest(
        region_id=s.region, image_id=s.image_id, instance_type=s.instance_type, security_group_id=s.security_group_id,
        v_switch_id=s.vswitch_id, instance_name=s.instance_name, host_name=s.instance_name,
        key_pair_name=s.key_pair_name or None, internet_max_bandwidth_out=s.internet_max_bandwidth_out, amount=1,
        system_disk=ecs.RunInstancesRequestSystemDisk(category="cloud_essd", size=str(s.system_disk_gb)),
        user_data=base64.b64encode(user_data.encode()).decode(), client_token=token,
        tag=[ecs.RunInstancesRequestTag(key="mnemo", value=s.instance_name)])
    update = ecs.RunCommandRequest(
        region_id=s.region, instance_id=["<the instance found>"], type="RunShellScript", name="mnemo-rollout",
        command_content=base64.b64encode(render_rollout(s).encode()).decode(), content_encoding="Base64",
        timeout=900, description=f"roll out {s.package}")
    return {"describe": describe, "create": create, "update": update}


def ecs_client(s: Settings, environ: dict[str, str], endpoint: str | None = None, protocol: str = "https"):
    """Return an ECS client with credentials from the environment (never from a file)."""
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi.utils_models import Config

    missing = [k for k in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET") if not environ.get(k)]
    if missing:
        raise DeployError(f"set {' and '.join(missing)} in the environment (a RAM user with ECS permissions)")
    return Client(Config(access_key_id=environ["ALIBABA_CLOUD_ACCESS_KEY_ID"],
                         access_key_secret=environ["ALIBABA_CLOUD_ACCESS_KEY_SECRET"], region_id=s.region,
                         endpoint=endpoint or f"ecs.{s.region}.aliyuncs.com", protocol=protocol))


def deploy_ecs(s: Settings, environ: dict[str, str], *, dry_run: bool, out=sys.stdout, client=None) -> dict:
    """Create the instance if no instance has its name, else roll out to it with Cloud Assistant."""
    if not dry_run:
        for name in ("image_id", "security_group_id", "vswitch_id"):
            if not getattr(s, name):
                raise DeployError(f"set {name} in the deploy settings")
    reqs = ecs_requests(s)
    if dry_run:
        shown = {name: req.to_map() for name, req in reqs.items()}
        shown["create"]["UserData(decoded)"] = render_user_data(s)
        shown["update"]["CommandContent(decoded)"] = render_rollout(s)
        print("# dry run: no API call is made. The deploy would send DescribeInstances, then RunInstances if no "
              f"instance is named {s.instance_name!r}, or RunCommand to the one that is.", file=out)
        print(json.dumps(shown, indent=2, sort_keys=True), file=out)
        return {"action": "dry-run"}
    client = client or ecs_client(s, environ)
    found = client.describe_instances(reqs["describe"]).body.instances.instance or []
    if len(found) > 1:
        raise DeployError(f"{len(found)} instances are named {s.instance_name!r}; rename all but one")
    if not found:
        ids = client.run_instances(reqs["create"]).body.instance_id_sets.instance_id_set
        print(f"created {ids[0]} in {s.region}; cloud-init installs mnemo on first boot. Then run "
              f"`deploy.py ssh --host USER@IP` to write {s.env_file} and start the service.", file=out)
        return {"action": "create", "instance_id": ids[0]}
    update = reqs["update"]
    update.instance_id = [found[0].instance_id]
    invoke = client.run_command(update).body.invoke_id
    print(f"rolling out to {found[0].instance_id} with Cloud Assistant (invoke {invoke}); follow it with "
          f"DescribeInvocationResults --InvokeId {invoke}", file=out)
    return {"action": "update", "instance_id": found[0].instance_id, "invoke_id": invoke}


# ----------------------------------------------------------------- ssh
SSH_OPTS = ("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=15")


def ssh_plan(s: Settings, host: str, environ: dict[str, str], ssh: str = "ssh") -> list[tuple[list[str], str]]:
    """Return the (command, stdin) steps of an ssh rollout: secrets file first, then the rollout script."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+@[A-Za-z0-9_.:-]+|[A-Za-z0-9_.:-]+", host):
        raise DeployError(f"--host must be USER@HOST or HOST, not {host!r}")
    body, missing = env_file(s, environ)
    if missing:
        raise DeployError(f"set {', '.join(missing)} in the environment: they become {s.env_file} on the instance")
    base = [ssh, *SSH_OPTS, host]
    return [
        ([*base, f"sudo install -D -m 0600 -o root -g root /dev/stdin {s.env_file}"], body),
        ([*base, "sudo sh -s"], render_rollout(s)),
    ]


def deploy_ssh(s: Settings, host: str, environ: dict[str, str], *, dry_run: bool, out=sys.stdout,
               ssh: str = "ssh") -> None:
    """Write the secrets file and run the rollout over ssh (or, with dry_run, print both steps)."""
    steps = ssh_plan(s, host, environ, ssh)
    for n, (cmd, stdin) in enumerate(steps):
        shown = redacted(s, environ) if n == 0 else stdin
        if dry_run:
            print(f"# step {n + 1}: {shlex.join(cmd)}\n# with standard input:\n{shown}", file=out)
            continue
        result = subprocess.run(cmd, input=stdin.encode(), check=False)
        if result.returncode:
            raise DeployError(f"step {n + 1} failed (exit {result.returncode}): {shlex.join(cmd)}")
    if dry_run:
        print("# dry run: nothing was run", file=out)


def render(s: Settings, out_dir: str | Path) -> list[Path]:
    """Write mnemo.service, rollout.sh and user-data.yaml into `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"mnemo.service": render_unit(s), "rollout.sh": render_rollout(s), "user-data.yaml": render_user_data(s)}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("render", "write the unit, rollout script and user-data"),
                       ("ecs", "create or update the instance with the ECS SDK"),
                       ("ssh", "write secrets and roll out over ssh")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--config", help="YAML settings (see deploy.example.yaml); defaults otherwise")
        p.add_argument("--dry-run", action="store_true", help="print what would be done; do nothing")
        if name == "render":
            p.add_argument("--out", default="build/ecs", help="folder to write the rendered files into")
        if name == "ssh":
            p.add_argument("--host", required=True, help="USER@HOST of the instance")
    args = parser.parse_args(argv)
    try:
        settings = Settings.load(args.config)
        environ = dict(os.environ)
        if args.command == "render":
            if args.dry_run:
                print(f"# would write {args.out}/mnemo.service, rollout.sh, user-data.yaml:\n{render_user_data(settings)}")
            else:
                print("\n".join(str(p) for p in render(settings, args.out)))
        elif args.command == "ecs":
            deploy_ecs(settings, environ, dry_run=args.dry_run)
        else:
            deploy_ssh(settings, args.host, environ, dry_run=args.dry_run)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
