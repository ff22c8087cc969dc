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

Two profiles. `single` (the default): one instance, the tenants' DuckDB files on its disk,
one service process. `replicas`: `instances` instances named INSTANCE_NAME-1..N, each
running the service over one RDS PostgreSQL database (`database_url`, without its
password: libpq reads PGPASSWORD from the secrets file), behind one SLB whose HTTP
listener health-checks /readyz. `ecs` then also finds or creates the SLB (by
`slb_name`) with the generic OpenAPI client of the ECS SDK's own dependency, adds the
instances as its backends, and rolls out one instance at a time, waiting for each
Cloud Assistant run to finish, so the others keep serving.

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
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from string import Template

import yaml

TEMPLATES = Path(__file__).resolve().parent / "templates"
SAFE = re.compile(r"^[A-Za-z0-9_.,:/@+=\[\]-]+$")  # values that go into shell and unit lines unquoted
DSN = re.compile(r"postgres(ql)?://[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+(:[0-9]{1,5})?/[A-Za-z0-9_]+"
                 r"(\?[A-Za-z0-9_]+=[A-Za-z0-9_.-]+(&[A-Za-z0-9_]+=[A-Za-z0-9_.-]+)*)?")


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
    profile: str = "single"  # single (one instance, DuckDB files) | replicas (N instances, SLB, one RDS PostgreSQL)
    instances: int = 1  # replicas: how many service instances, named INSTANCE_NAME-1 .. -N
    database_url: str = ""  # replicas: postgresql://USER@HOST:PORT/DB?schema=mnemo (no password: PGPASSWORD)
    state_dir: str = "/var/lib/mnemo"  # replicas: the service's working directory (the stores are in the database)
    slb_name: str = "mnemo-slb"  # replicas: the load balancer, found by this name or created
    slb_spec: str = "slb.s1.small"  # replicas: SLB instance spec
    slb_address_type: str = "intranet"  # replicas: intranet (in the VPC) | internet (public address)
    slb_port: int = 80  # replicas: the listener's port; it forwards to `port` on each instance

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
        if self.profile not in ("single", "replicas"):
            raise DeployError(f"profile must be single or replicas, not {self.profile!r}")
        if self.profile == "replicas":
            self._check_replicas()

    def _check_replicas(self) -> None:
        if self.protocol != "http":
            raise DeployError("the replicas profile serves `mnemo serve http`; set protocol: http")
        if not 2 <= int(self.instances) <= 20:
            raise DeployError(f"instances must be 2-20 for the replicas profile, not {self.instances}")
        # No password, no '%' (a systemd specifier), nothing a shell or unit line would split on.
        if not DSN.fullmatch(self.database_url):
            raise DeployError("database_url must be postgresql://USER@HOST[:PORT]/DB[?schema=NAME&sslmode=...] "
                              f"without a password (it goes to PGPASSWORD in env_keys), not {self.database_url!r}")
        if "PGPASSWORD" not in self.env_keys:
            raise DeployError("add PGPASSWORD to env_keys: the database password reaches the instances only "
                              "through the secrets file")
        if not self.state_dir.startswith("/") or not SAFE.match(self.state_dir):
            raise DeployError(f"state_dir must be an absolute path of plain characters, not {self.state_dir!r}")
        if self.slb_address_type not in ("intranet", "internet") or not 0 < int(self.slb_port) < 65536:
            raise DeployError("slb_address_type must be intranet or internet, and slb_port 1-65535")
        for name in ("slb_name", "slb_spec"):
            if not SAFE.match(str(getattr(self, name))):
                raise DeployError(f"{name} has characters that are unsafe: {getattr(self, name)!r}")

    @property
    def names(self) -> list[str]:
        """The instance names: `instance_name` alone, or INSTANCE_NAME-1 .. -N for the replicas profile."""
        if self.profile == "single":
            return [self.instance_name]
        return [f"{self.instance_name}-{k}" for k in range(1, int(self.instances) + 1)]

    @property
    def work_dir(self) -> str:
        """The service's working (and only writable) directory: the store folder, or state_dir with replicas."""
        return self.store_dir if self.profile == "single" else self.state_dir


def _template(name: str, values: dict[str, object]) -> str:
    return Template((TEMPLATES / name).read_text()).substitute(values)


def _indent(text: str, spaces: int) -> str:
    return "\n".join((" " * spaces + line) if line else "" for line in text.rstrip("\n").split("\n"))


def exec_start(s: Settings) -> str:
    """Return the unit's ExecStart line for the configured protocol and profile."""
    if s.profile == "replicas":
        return f"{s.venv}/bin/mnemo serve http --store-dir {s.database_url} --host {s.bind} --port {s.port}"
    if s.protocol == "http":
        return f"{s.venv}/bin/mnemo serve http --store-dir {s.store_dir} --host {s.bind} --port {s.port}"
    # MCP over HTTP serves the same tenants and keys (MNEMO_API_KEYS in the secrets file) as the HTTP service.
    return f"{s.venv}/bin/mnemo serve mcp --transport http --store-dir {s.store_dir} --host {s.bind} --port {s.port}"


def _values(s: Settings) -> dict[str, object]:
    replicas = s.profile == "replicas"
    note = ("Replicas: every instance runs this unit over the same PostgreSQL database, behind one SLB."
            if replicas else "One process per store: DuckDB allows one writer per file, so never more than one "
                             "instance of this unit.")
    return {**asdict(s), "work_dir": s.work_dir, "instances_note": note}


def render_unit(s: Settings) -> str:
    """Return the systemd unit for the service."""
    return _template("mnemo.service.tmpl", {**_values(s), "exec_start": exec_start(s)})


def render_rollout(s: Settings) -> str:
    """Return the idempotent install-or-upgrade script (first boot, ssh and Cloud Assistant all run it)."""
    # HTTP has a health route (replicas: /readyz, which asks the database); MCP's endpoint only needs to answer.
    route = "readyz" if s.profile == "replicas" else "healthz"
    check = (f"curl -fsS -o /dev/null http://127.0.0.1:{s.port}/{route}" if s.protocol == "http"
             else f"curl -sS -o /dev/null http://127.0.0.1:{s.port}/mcp")
    return _template("rollout.sh.tmpl", {**_values(s), "unit": render_unit(s).rstrip("\n"), "health_check": check,
                                         "env_dir": str(Path(s.env_file).parent)})


def render_user_data(s: Settings) -> str:
    """Return the cloud-init user-data (#cloud-config): a user, packages, the rollout script, run once."""
    return _template("user-data.yaml.tmpl", {**_values(s), "rollout_indented": _indent(render_rollout(s), 6)})


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
def ecs_requests(s: Settings, name: str | None = None) -> dict[str, object]:
    """Return the ECS SDK requests for instance `name`: a lookup, then create (none found) or update (one found)."""
    from alibabacloud_ecs20140526 import models as ecs

    name = name or s.instance_name
    user_data = render_user_data(s)
    if len(base64.b64encode(user_data.encode())) > 32_768:
        raise DeployError("the rendered user-data is over ECS's 32 KB limit once base64-encoded; shorten the templates")
    describe = ecs.DescribeInstancesRequest(region_id=s.region, instance_name=name, page_size=10)
    # A ClientToken makes a retried RunInstances return the first instance instead of creating a second one.
    token = hashlib.sha256(f"{s.region}|{name}|{user_data}".encode()).hexdigest()[:32]
    create = ecs.RunInstancesRequest(
        region_id=s.region, image_id=s.image_id, instance_type=s.instance_type, security_group_id=s.security_group_id,
        v_switch_id=s.vswitch_id, instance_name=name, host_name=name,
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


def deploy_ecs(s: Settings, environ: dict[str, str], *, dry_run: bool, out=sys.stdout, client=None,
               slb=None, poll_s: float = 5.0) -> dict:
    """Create the instance if no instance has its name, else roll out to it with Cloud Assistant.

    With the replicas profile: every instance, the SLB in front of them, and a rollout one
    instance at a time (`deploy_replicas`).
    """
    if not dry_run:
        for name in ("image_id", "security_group_id", "vswitch_id"):
            if not getattr(s, name):
                raise DeployError(f"set {name} in the deploy settings")
    if s.profile == "replicas":
        return deploy_replicas(s, environ, dry_run=dry_run, out=out, client=client, slb=slb, poll_s=poll_s)
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


# ----------------------------------------------------------------- replicas: N instances behind one SLB
SLB_VERSION = "2014-05-15"
LB = "<the load balancer>"


def slb_requests(s: Settings) -> dict[str, tuple[str, dict[str, object]]]:
    """Return the SLB API calls of the replicas profile, {step: (Action, parameters)}; LB stands for the id."""
    token = hashlib.sha256(f"{s.region}|{s.slb_name}".encode()).hexdigest()[:32]
    create: dict[str, object] = {"RegionId": s.region, "LoadBalancerName": s.slb_name, "AddressType": s.slb_address_type,
                                 "LoadBalancerSpec": s.slb_spec, "ClientToken": token}
    if s.slb_address_type == "intranet":
        create["VSwitchId"] = s.vswitch_id
    return {
        "describe": ("DescribeLoadBalancers", {"RegionId": s.region, "LoadBalancerName": s.slb_name}),
        "create": ("CreateLoadBalancer", create),
        # The health check is /readyz: an instance whose database does not answer gets no traffic.
        "listener": ("CreateLoadBalancerHTTPListener", {
            "RegionId": s.region, "LoadBalancerId": LB, "ListenerPort": s.slb_port, "BackendServerPort": s.port,
            "Bandwidth": -1, "StickySession": "off", "HealthCheck": "on", "HealthCheckURI": "/readyz",
            "HealthCheckHttpCode": "http_2xx", "HealthCheckInterval": 2, "HealthyThreshold": 2,
            "UnhealthyThreshold": 2}),
        "start": ("StartLoadBalancerListener", {"RegionId": s.region, "LoadBalancerId": LB,
                                                "ListenerPort": s.slb_port}),
        "backends": ("AddBackendServers", {"RegionId": s.region, "LoadBalancerId": LB, "BackendServers": "<instances>"}),
    }


def slb_client(s: Settings, environ: dict[str, str], endpoint: str | None = None, protocol: str = "https"):
    """Return the generic OpenAPI client (the ECS SDK's own dependency) pointed at SLB."""
    from alibabacloud_tea_openapi.client import Client
    from alibabacloud_tea_openapi.utils_models import Config

    ecs_client(s, environ)  # the same credentials check and message
    return Client(Config(access_key_id=environ["ALIBABA_CLOUD_ACCESS_KEY_ID"],
                         access_key_secret=environ["ALIBABA_CLOUD_ACCESS_KEY_SECRET"], region_id=s.region,
                         endpoint=endpoint or f"slb.{s.region}.aliyuncs.com", protocol=protocol))


def slb_call(client, action: str, params: dict[str, object]) -> dict:
    """Call one SLB action (RPC style, signed like the ECS SDK's calls); return the response body."""
    from alibabacloud_tea_openapi.utils import Utils
    from alibabacloud_tea_openapi.utils_models import OpenApiRequest, Params
    from darabonba.runtime import RuntimeOptions

    spec = Params(action=action, version=SLB_VERSION, protocol="HTTPS", pathname="/", method="POST", auth_type="AK",
                  style="RPC", req_body_type="formData", body_type="json")
    query = Utils.query({k: str(v) for k, v in params.items()})
    return client.call_api(spec, OpenApiRequest(query=query), RuntimeOptions())["body"]


def _wait_invocation(client, s: Settings, invoke_id: str, poll_s: float, timeout_s: float = 900.0) -> None:
    """Wait for one Cloud Assistant run to finish; raise DeployError unless it succeeded."""
    from alibabacloud_ecs20140526 import models as ecs

    deadline = time.monotonic() + timeout_s
    while True:
        found = client.describe_invocation_results(
            ecs.DescribeInvocationResultsRequest(region_id=s.region, invoke_id=invoke_id))
        results = found.body.invocation.invocation_results.invocation_result or []
        status = results[0].invocation_status if results else "Pending"
        if status == "Success":
            return
        if status in ("Failed", "Error", "Timeout", "Cancelled", "Terminated"):
            raise DeployError(f"rollout {invoke_id} ended {status} (exit {results[0].exit_code}); the other "
                              "instances were not touched: fix it and deploy again")
        if time.monotonic() > deadline:
            raise DeployError(f"rollout {invoke_id} still {status} after {timeout_s:g} s")
        time.sleep(poll_s)


def deploy_replicas(s: Settings, environ: dict[str, str], *, dry_run: bool, out=sys.stdout, client=None, slb=None,
                    poll_s: float = 5.0) -> dict:
    """Create the missing instances and the SLB, register every instance with it, roll out one at a time."""
    reqs = {name: ecs_requests(s, name) for name in s.names}
    calls = slb_requests(s)
    if dry_run:
        shown = {"instances": {name: {step: r.to_map() for step, r in req.items()} for name, req in reqs.items()},
                 "slb": {step: {"Action": action, **params} for step, (action, params) in calls.items()},
                 "UserData(decoded)": render_user_data(s), "CommandContent(decoded)": render_rollout(s)}
        print(f"# dry run: no API call is made. For each of {', '.join(s.names)}: DescribeInstances, then "
              "RunInstances if none has the name, else RunCommand (one instance at a time, each waited for with "
              f"DescribeInvocationResults). Then DescribeLoadBalancers {s.slb_name!r}; if none, CreateLoadBalancer, "
              "CreateLoadBalancerHTTPListener, StartLoadBalancerListener; then AddBackendServers with every "
              "instance.", file=out)
        print(json.dumps(shown, indent=2, sort_keys=True), file=out)
        return {"action": "dry-run"}
    client = client or ecs_client(s, environ)
    slb = slb or slb_client(s, environ)
    ids, created, existing = {}, [], []
    for name, req in reqs.items():
        found = client.describe_instances(req["describe"]).body.instances.instance or []
        if len(found) > 1:
            raise DeployError(f"{len(found)} instances are named {name!r}; rename all but one")
        if found:
            ids[name] = found[0].instance_id
            existing.append(name)
        else:
            ids[name] = client.run_instances(req["create"]).body.instance_id_sets.instance_id_set[0]
            created.append(name)
    balancers = (slb_call(slb, *calls["describe"]).get("LoadBalancers") or {}).get("LoadBalancer") or []
    if len(balancers) > 1:
        raise DeployError(f"{len(balancers)} load balancers are named {s.slb_name!r}; rename all but one")
    if balancers:
        lb = balancers[0]["LoadBalancerId"]
    else:
        lb = slb_call(slb, *calls["create"])["LoadBalancerId"]
        for step in ("listener", "start"):
            action, params = calls[step]
            slb_call(slb, action, {**params, "LoadBalancerId": lb})
    action, params = calls["backends"]
    servers = [{"ServerId": ids[name], "Weight": "100", "Type": "ecs"} for name in s.names]
    slb_call(slb, action, {**params, "LoadBalancerId": lb, "BackendServers": json.dumps(servers)})
    # One instance at a time: the SLB's /readyz check takes each out while it restarts, the others serve.
    for name in existing:
        update = reqs[name]["update"]
        update.instance_id = [ids[name]]
        invoke = client.run_command(update).body.invoke_id
        _wait_invocation(client, s, invoke, poll_s)
        print(f"rolled out to {name} ({ids[name]})", file=out)
    if created:
        print(f"created {', '.join(created)}; cloud-init installs mnemo on first boot. Then run `deploy.py ssh "
              f"--host USER@IP` once per instance to write {s.env_file} (with PGPASSWORD) and start them.", file=out)
    return {"action": "replicas", "created": created, "updated": existing, "load_balancer_id": lb,
            "instance_ids": [ids[n] for n in s.names]}


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
            p.add_argument("--host", required=True, action="append",
                           help="USER@HOST of the instance; repeat for each replica (rolled out in turn)")
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
            for host in args.host:
                deploy_ssh(settings, host, environ, dry_run=args.dry_run)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
