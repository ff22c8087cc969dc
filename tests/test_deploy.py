"""ECS deploy: rendered files pass their own validators, the SDK and ssh paths do what --dry-run says,
and the service started from the rendered unit answers its health check and survives kill -9."""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
import requests
import yaml
from conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("mnemo_ecs_deploy", ROOT / "deploy" / "ecs" / "deploy.py")
deploy = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = deploy  # dataclasses look their module up while the class is built
SPEC.loader.exec_module(deploy)
EXAMPLE = ROOT / "deploy" / "ecs" / "deploy.example.yaml"
REPLICAS = ROOT / "deploy" / "ecs" / "deploy.replicas.example.yaml"
SECRETS = {"MNEMO_API_KEYS": "k-live-0123456789abcdef:acme", "DASHSCOPE_API_KEY": "sk-dashscope-secret-value"}
AK, SK = "LTAI-test-access-key", "test-access-secret-do-not-print"


def settings(example=EXAMPLE, **overrides):
    return deploy.Settings.load(example, **overrides)


PROFILES = pytest.mark.parametrize("example", [EXAMPLE, REPLICAS], ids=["single", "replicas"])


# ----------------------------------------------------------------- rendered files
@PROFILES
def test_user_data_passes_cloud_init_schema(tmp_path, example):
    user_data = tmp_path / "user-data.yaml"
    user_data.write_text(deploy.render_user_data(settings(example)))
    schema_file = Path("/usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-cloud-config-v1.json")
    require_tool(schema_file.exists() and shutil.which("cloud-init") is not None, "cloud-init",
                 "install cloud-init: apt-get install -y --no-install-recommends cloud-init")
    import jsonschema

    schema = json.loads(schema_file.read_text())
    doc = yaml.safe_load(user_data.read_text())
    res = subprocess.run(["cloud-init", "schema", "--config-file", str(user_data)], capture_output=True, text=True)
    assert res.returncode == 0 and "Valid cloud-config" in res.stdout, res.stdout + res.stderr
    jsonschema.Draft4Validator(schema).validate(doc)
    # cloud-init's schema allows unknown top-level keys (it only warns), so check them here.
    known = set(schema.get("properties", {}))
    for ref in schema.get("allOf", []):
        name = ref.get("$ref", "").split("/")[-1]
        known |= set(schema.get("$defs", {}).get(name, {}).get("properties", {}))
    assert set(doc) <= known, set(doc) - known
    assert user_data.read_text().startswith("#cloud-config\n")
    assert doc["write_files"][0]["content"] == deploy.render_rollout(settings(example))
    assert doc["runcmd"] == [["/usr/local/sbin/mnemo-rollout"]]


@PROFILES
def test_user_data_holds_no_secret(monkeypatch, example):
    for k, v in {**SECRETS, "PGPASSWORD": "pg-secret-password"}.items():
        monkeypatch.setenv(k, v)
    text = deploy.render_user_data(settings(example))
    assert not any(v in text for v in [*SECRETS.values(), "pg-secret-password"])


@PROFILES
def test_unit_passes_systemd_analyze_verify(tmp_path, example):
    require_tool(shutil.which("systemd-analyze") is not None, "systemd-analyze", "install systemd: apt-get install -y systemd")
    # ExecStart must name an existing binary for verify: point the venv at this interpreter's.
    unit = tmp_path / "mnemo.service"
    unit.write_text(deploy.render_unit(settings(example, venv=sys.prefix, store_dir=str(tmp_path),
                                                state_dir=str(tmp_path))))
    res = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert res.returncode == 0 and not (res.stdout + res.stderr).strip(), res.stdout + res.stderr


@PROFILES
def test_rollout_is_valid_sh_and_writes_the_unit_verbatim(tmp_path, example):
    s = settings(example)
    script = tmp_path / "rollout.sh"
    script.write_text(deploy.render_rollout(s))
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    text = script.read_text()
    unit = text.split("<<'MNEMO_UNIT'\n", 1)[1].split("\nMNEMO_UNIT\n", 1)[0]
    assert unit + "\n" == deploy.render_unit(s)
    assert "'mnemo-ltm[server]==0.1.0'" in text
    # A replica is up when it is ready (its database answers), not merely alive.
    assert ("/readyz" if s.profile == "replicas" else "/healthz") in text


def test_render_writes_three_files(tmp_path):
    paths = deploy.render(settings(protocol="mcp", port=8765), tmp_path / "out")
    assert [p.name for p in paths] == ["mnemo.service", "rollout.sh", "user-data.yaml"]
    assert "serve mcp --transport http --store-dir /var/lib/mnemo --host" in paths[0].read_text()
    replicas = deploy.render(settings(REPLICAS), tmp_path / "replicas")[0].read_text()
    assert "serve http --store-dir postgresql://mnemo@pgm-REPLACE-ME.pg.rds.aliyuncs.com:5432/mnemo?schema=mnemo" \
        "&sslmode=require --host 0.0.0.0 --port 8080" in replicas
    assert "WorkingDirectory=/var/lib/mnemo" in replicas and "DuckDB allows one writer" not in replicas


@pytest.mark.parametrize("bad, match", [
    ({"colour": "blue"}, "unknown setting"), ({"port": 70000}, "port"), ({"protocol": "grpc"}, "protocol"),
    ({"store_dir": "relative/dir"}, "store_dir"), ({"venv": "/opt/my venv"}, "venv"),
    ({"package": "mnemo'; rm -rf /"}, "package"), ({"bind": "0.0.0.0; curl x"}, "bind"),
    ({"env_keys": ["lower"]}, "env_keys"), ({"profile": "cluster"}, "profile"),
    ({"profile": "replicas", "instances": 2}, "database_url"),
    ({"profile": "replicas", "instances": 1, "database_url": "postgresql://u@h/db"}, "instances"),
    ({"profile": "replicas", "instances": 2, "database_url": "postgresql://u:secret@h/db"}, "without a password"),
    ({"profile": "replicas", "instances": 2, "database_url": "postgresql://u@h/db?x=%41"}, "database_url"),
    ({"profile": "replicas", "instances": 2, "database_url": "postgresql://u@h/db; rm -rf /"}, "database_url"),
    ({"profile": "replicas", "instances": 2, "database_url": "postgresql://u@h/db"}, "PGPASSWORD"),
    ({"profile": "replicas", "instances": 2, "database_url": "postgresql://u@h/db", "protocol": "mcp",
      "env_keys": ["PGPASSWORD"]}, "protocol: http")])
def test_settings_are_strict(bad, match, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(deploy.DeployError, match=match):
        deploy.Settings.load(path)


# ----------------------------------------------------------------- ECS SDK, against a recording fake of the API
class FakeECS(ThreadingHTTPServer):
    """Records ECS API calls and checks ACS3-HMAC-SHA256 as Alibaba Cloud documents it (not the SDK's code)."""

    daemon_threads = True

    def __init__(self, fail_rollouts=0):
        super().__init__(("127.0.0.1", 0), _ECSHandler)
        self.instances: dict[str, str] = {}  # name -> id
        self.balancers: list[str] = []
        self.calls: list[dict] = []
        self.fail_rollouts = fail_rollouts  # the first N Cloud Assistant runs end Failed

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def acs3_signature(secret, method, path, query, headers, signed):
    enc = lambda s: quote(s, safe="-_.~")  # noqa: E731
    canon_query = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(query))
    canon_headers = "".join(f"{h}:{headers[h].strip()}\n" for h in signed)
    canonical = "\n".join([method, path, canon_query, canon_headers, ";".join(signed), headers["x-acs-content-sha256"]])
    to_sign = "ACS3-HMAC-SHA256\n" + hashlib.sha256(canonical.encode()).hexdigest()
    return hmac.new(secret.encode(), to_sign.encode(), hashlib.sha256).hexdigest()


class _ECSHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        split = urlsplit(self.path)
        query = parse_qsl(split.query, keep_blank_values=True)
        headers = {k.lower(): v for k, v in self.headers.items()}
        auth = headers.get("authorization", "")
        fields = dict(p.split("=", 1) for p in auth.removeprefix("ACS3-HMAC-SHA256 ").split(","))
        ok = fields.get("Credential") == AK and hmac.compare_digest(
            fields.get("Signature", ""),
            acs3_signature(SK, self.command, split.path, query, headers, fields.get("SignedHeaders", "").split(";")))
        action = headers.get("x-acs-action")
        self.server.calls.append({"action": action, "params": dict(query), "signed": ok})
        if not ok:
            body = {"Code": "IncompleteSignature", "Message": "The request signature does not conform.", "RequestId": "r"}
            return self._send(400, body)
        body, params, fake = {"RequestId": "r"}, dict(query), self.server
        if action == "DescribeInstances":
            found = [i for n, i in fake.instances.items() if n == params.get("InstanceName")]
            body["Instances"] = {"Instance": [{"InstanceId": i} for i in found]}
        elif action == "RunInstances":
            new = f"i-new{len(fake.instances) + 1:04d}"
            fake.instances[params["InstanceName"]] = new
            body["InstanceIdSets"] = {"InstanceIdSet": [new]}
        elif action == "RunCommand":
            body.update({"CommandId": "c-1", "InvokeId": f"t-{sum(c['action'] == 'RunCommand' for c in fake.calls)}"})
        elif action == "DescribeInvocationResults":
            failed = int(params["InvokeId"].split("-")[1]) <= fake.fail_rollouts
            result = {"InvocationStatus": "Failed" if failed else "Success", "ExitCode": 1 if failed else 0}
            body["Invocation"] = {"InvocationResults": {"InvocationResult": [result]}}
        elif action == "DescribeLoadBalancers":
            body["LoadBalancers"] = {"LoadBalancer": [{"LoadBalancerId": b} for b in fake.balancers]}
        elif action == "CreateLoadBalancer":
            fake.balancers.append("lb-new0001")
            body.update({"LoadBalancerId": "lb-new0001", "Address": "192.168.0.10"})
        self._send(200, body)

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def ecs_client(server, secret=SK):
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": AK, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": secret}
    return deploy.ecs_client(settings(), env, endpoint=f"127.0.0.1:{server.server_address[1]}", protocol="http")


def slb_client(server, secret=SK):
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": AK, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": secret}
    return deploy.slb_client(settings(), env, endpoint=f"127.0.0.1:{server.server_address[1]}", protocol="http")


def test_ecs_creates_then_rolls_out_through_the_sdk():
    s, out = settings(), io.StringIO()
    with FakeECS() as server:
        first = deploy.deploy_ecs(s, {}, dry_run=False, out=out, client=ecs_client(server))
        second = deploy.deploy_ecs(s, {}, dry_run=False, out=out, client=ecs_client(server))
    assert first == {"action": "create", "instance_id": "i-new0001"}
    assert second == {"action": "update", "instance_id": "i-new0001", "invoke_id": "t-1"}
    assert [c["action"] for c in server.calls] == ["DescribeInstances", "RunInstances", "DescribeInstances", "RunCommand"]
    assert all(c["signed"] for c in server.calls)
    create, update = server.calls[1]["params"], server.calls[3]["params"]
    assert base64.b64decode(create["UserData"]).decode() == deploy.render_user_data(s)
    assert (create["ImageId"], create["SecurityGroupId"], create["VSwitchId"]) == (
        s.image_id, s.security_group_id, s.vswitch_id)
    assert create["InstanceName"] == s.instance_name and create["Tag.1.Key"] == "mnemo"
    assert base64.b64decode(update["CommandContent"]).decode() == deploy.render_rollout(s)
    assert update["Type"] == "RunShellScript" and update["InstanceId.1"] == "i-new0001"


def test_ecs_refuses_a_wrong_secret():
    with FakeECS() as server, pytest.raises(Exception, match="IncompleteSignature"):
        deploy.deploy_ecs(settings(), {}, dry_run=False, client=ecs_client(server, secret="wrong"))
    assert [c["action"] for c in server.calls] == ["DescribeInstances"]


def test_ecs_dry_run_prints_every_request_and_no_secret():
    out = io.StringIO()
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": AK, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": SK, **SECRETS}
    assert deploy.deploy_ecs(settings(), env, dry_run=True, out=out) == {"action": "dry-run"}
    text = out.getvalue()
    shown = json.loads(text.split("\n", 1)[1])
    assert shown["describe"]["InstanceName"] == "mnemo-1"
    assert shown["create"]["UserData(decoded)"] == deploy.render_user_data(settings())
    assert shown["update"]["CommandContent(decoded)"] == deploy.render_rollout(settings())
    assert AK not in text and SK not in text and not any(v in text for v in SECRETS.values())


def test_ecs_without_credentials_says_which_variables():
    with pytest.raises(deploy.DeployError, match="ALIBABA_CLOUD_ACCESS_KEY_ID"):
        deploy.deploy_ecs(settings(), {}, dry_run=False)


def _replicas(server, s, **kw):
    return deploy.deploy_ecs(s, {}, dry_run=False, out=io.StringIO(), client=ecs_client(server),
                             slb=slb_client(server), poll_s=0.01, **kw)


def test_replicas_create_instances_and_slb_then_roll_out_one_at_a_time():
    s = settings(REPLICAS, instances=3)
    with FakeECS() as server:
        first = _replicas(server, s)
        made = len(server.calls)
        second = _replicas(server, s)
    assert all(c["signed"] for c in server.calls), "SLB calls are signed like the ECS SDK's"
    assert first["created"] == ["mnemo-1", "mnemo-2", "mnemo-3"] and first["load_balancer_id"] == "lb-new0001"
    assert [c["action"] for c in server.calls[:made]] == [
        "DescribeInstances", "RunInstances"] * 3 + ["DescribeLoadBalancers", "CreateLoadBalancer",
                                                     "CreateLoadBalancerHTTPListener", "StartLoadBalancerListener",
                                                     "AddBackendServers"]
    calls = {c["action"]: c["params"] for c in server.calls[:made]}
    assert [c["params"]["InstanceName"] for c in server.calls[:made] if c["action"] == "RunInstances"] == \
        ["mnemo-1", "mnemo-2", "mnemo-3"]
    listener = calls["CreateLoadBalancerHTTPListener"]
    assert (listener["LoadBalancerId"], listener["HealthCheckURI"], listener["BackendServerPort"],
            listener["ListenerPort"]) == ("lb-new0001", "/readyz", "8080", "80")
    assert calls["CreateLoadBalancer"]["VSwitchId"] == s.vswitch_id
    assert calls["CreateLoadBalancer"]["AddressType"] == "intranet"
    servers = json.loads(calls["AddBackendServers"]["BackendServers"])
    assert [b["ServerId"] for b in servers] == ["i-new0001", "i-new0002", "i-new0003"]
    # The second deploy finds everything and rolls out in turn: each run is waited for before the next starts.
    assert second == {"action": "replicas", "created": [], "updated": ["mnemo-1", "mnemo-2", "mnemo-3"],
                      "load_balancer_id": "lb-new0001", "instance_ids": ["i-new0001", "i-new0002", "i-new0003"]}
    later = server.calls[made:]
    assert [c["action"] for c in later] == ["DescribeInstances"] * 3 + ["DescribeLoadBalancers", "AddBackendServers"] \
        + ["RunCommand", "DescribeInvocationResults"] * 3
    assert [c["params"]["InstanceId.1"] for c in later if c["action"] == "RunCommand"] == \
        ["i-new0001", "i-new0002", "i-new0003"]
    assert base64.b64decode(later[5]["params"]["CommandContent"]).decode() == deploy.render_rollout(s)


def test_replicas_stop_at_the_first_failed_rollout():
    s = settings(REPLICAS)
    with FakeECS() as server:
        _replicas(server, s)
        server.fail_rollouts = 1
        with pytest.raises(deploy.DeployError, match="ended Failed"):
            _replicas(server, s)
    assert sum(c["action"] == "RunCommand" for c in server.calls) == 1, "the second instance was not touched"


def test_replicas_dry_run_lists_every_api_call_and_no_secret():
    out = io.StringIO()
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": AK, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": SK, **SECRETS, "PGPASSWORD": "pw-x"}
    assert deploy.deploy_ecs(settings(REPLICAS), env, dry_run=True, out=out) == {"action": "dry-run"}
    head, body = out.getvalue().split("\n", 1)
    for action in ("DescribeInstances", "RunInstances", "RunCommand", "DescribeInvocationResults",
                   "DescribeLoadBalancers", "CreateLoadBalancer", "CreateLoadBalancerHTTPListener",
                   "StartLoadBalancerListener", "AddBackendServers"):
        assert action in head, action
    shown = json.loads(body)
    assert sorted(shown["instances"]) == ["mnemo-1", "mnemo-2"]
    assert shown["instances"]["mnemo-2"]["create"]["InstanceName"] == "mnemo-2"
    assert shown["slb"]["listener"]["HealthCheckURI"] == "/readyz"
    assert AK not in body and SK not in body and "pw-x" not in body


# ----------------------------------------------------------------- ssh
@pytest.fixture
def fake_ssh(tmp_path):
    log = tmp_path / "ssh-log"
    log.mkdir()
    script = tmp_path / "ssh"
    script.write_text(f'#!/bin/sh\nn=$(ls "{log}" | wc -l)\nprintf "%s\\n" "$@" > "{log}/$n.args"\n'
                      f'cat > "{log}/$n.stdin"\n')
    script.chmod(0o755)
    return script, log


def test_ssh_rollout_writes_secrets_then_runs_the_script(fake_ssh):
    script, log = fake_ssh
    deploy.deploy_ssh(settings(), "ecs-user@203.0.113.7", SECRETS, dry_run=False, ssh=str(script))
    files = sorted(p.name for p in log.iterdir())
    assert files == ["0.args", "0.stdin", "2.args", "2.stdin"]
    assert (log / "0.args").read_text().splitlines()[-1] == "sudo install -D -m 0600 -o root -g root /dev/stdin /etc/mnemo/mnemo.env"
    assert (log / "0.stdin").read_text() == "".join(f"{k}={v}\n" for k, v in SECRETS.items())
    assert (log / "2.args").read_text().splitlines()[-2:] == ["ecs-user@203.0.113.7", "sudo sh -s"]
    assert (log / "2.stdin").read_text() == deploy.render_rollout(settings())


def test_ssh_dry_run_runs_nothing_and_redacts(fake_ssh):
    script, log = fake_ssh
    out = io.StringIO()
    deploy.deploy_ssh(settings(), "ecs-user@203.0.113.7", SECRETS, dry_run=True, out=out, ssh=str(script))
    text = out.getvalue()
    assert not list(log.iterdir())
    assert not any(v in text for v in SECRETS.values())
    assert "MNEMO_API_KEYS=<redacted" in text and deploy.render_rollout(settings()) in text
    assert shlex.join([str(script), *deploy.SSH_OPTS, "ecs-user@203.0.113.7", "sudo sh -s"]) in text


def test_ssh_refuses_missing_secrets_and_odd_hosts():
    with pytest.raises(deploy.DeployError, match="DASHSCOPE_API_KEY"):
        deploy.ssh_plan(settings(), "h", {"MNEMO_API_KEYS": "k:t"})
    with pytest.raises(deploy.DeployError, match="--host"):
        deploy.ssh_plan(settings(), "h; rm -rf /", SECRETS)


def test_cli_dry_run_exit_codes(tmp_path, capsys):
    assert deploy.main(["render", "--config", str(EXAMPLE), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "user-data.yaml").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("port: 0\n")
    assert deploy.main(["ecs", "--config", str(bad), "--dry-run"]) == 2
    assert "port" in capsys.readouterr().err


# ----------------------------------------------------------------- push_experiments
def test_push_experiments_script(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "results.json").write_text('{"ndcg@10": 0.5}')
    cmd = [sys.executable, str(ROOT / "deploy" / "push_experiments"), "--to", str(tmp_path / "cold"), str(run)]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True)
    assert dry.returncode == 0 and "would push" in dry.stdout and not (tmp_path / "cold").exists()
    real = subprocess.run(cmd, capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    assert (tmp_path / "cold" / "experiments" / "r1" / "results.json").read_text() == '{"ndcg@10": 0.5}'
    assert json.loads((tmp_path / "cold" / "experiments" / "r1" / "manifest.json").read_text())["files"][0]["sha256"]


# ----------------------------------------------------------------- the service, started from the rendered unit
def _unit_service(unit_text: str) -> dict[str, list[str]]:
    section, values = None, {}
    for line in unit_text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def _serve_http_available() -> bool:
    res = subprocess.run([str(Path(sys.prefix) / "bin" / "mnemo"), "serve", "http", "--help"],
                         capture_output=True, text=True)
    return res.returncode == 0 and "--store-dir" in res.stdout and "--port" in res.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(service: dict[str, list[str]], env_file: Path) -> subprocess.Popen:
    """Start ExecStart the way systemd would: its Environment= and EnvironmentFile=, in WorkingDirectory."""
    env = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith("MNEMO_")}
    for item in service.get("Environment", []):
        env.update([item.split("=", 1)])
    env.update(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    return subprocess.Popen(shlex.split(service["ExecStart"][0]), cwd=service["WorkingDirectory"][0], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"service exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise AssertionError("service did not answer /healthz in time")


@pytest.mark.slow
def test_service_from_rendered_unit_answers_and_survives_kill_9(tmp_path):
    if not _serve_http_available():
        pytest.skip("`mnemo serve http` (with --store-dir, --host, --port) is not in this build yet")
    port = _free_port()
    s = settings(venv=sys.prefix, store_dir=str(tmp_path / "stores"), env_file=str(tmp_path / "mnemo.env"),
                 bind="127.0.0.1", port=port)
    (tmp_path / "stores").mkdir()
    service = _unit_service(deploy.render_unit(s))
    assert service["EnvironmentFile"] == [s.env_file] and service["Restart"] == ["always"]
    env_file = Path(s.env_file)
    env_file.write_text(deploy.env_file(s, {"MNEMO_API_KEYS": "test-key-0123456789abcdef:acme", "DASHSCOPE_API_KEY": "unused"})[0])
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": "Bearer test-key-0123456789abcdef"}
    proc = _start(service, env_file)
    try:
        _wait_healthy(base, proc)
        ids = []
        for n in range(20):
            r = requests.post(f"{base}/v1/memories", headers=auth, timeout=30,
                              json={"text": f"Part P-{n} ships from bay {n}", "user": "ops", "subject": f"P-{n}",
                                    "attribute": "bay", "value": str(n)})
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown hook runs: only what was committed survives
        proc.wait(10)
        proc = _start(service, env_file)  # Restart=always does this under systemd
        _wait_healthy(base, proc)
        listed = requests.get(f"{base}/v1/memories", headers=auth, params={"user": "ops"}, timeout=30).json()
        assert sorted(m["id"] for m in listed["memories"]) == sorted(ids)
        assert requests.get(f"{base}/v1/memories", timeout=10).status_code == 401
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)


@pytest.mark.slow
def test_two_replicas_from_the_rendered_units_share_one_postgres(tmp_path):
    """The replicas profile's unit, started twice on loopback over a real PostgreSQL: both ready, one database."""
    import uuid

    import psycopg
    from conftest import require_postgres

    from mnemo.store import split_dsn

    dsn = require_postgres()
    schema = f"d{uuid.uuid4().hex[:10]}"
    env_file = tmp_path / "mnemo.env"
    env_file.write_text("MNEMO_API_KEYS=test-key-0123456789abcdef:acme\nPGPASSWORD=unused-with-trust-auth\n")
    procs, bases = [], []
    try:
        for _ in range(2):
            port = _free_port()
            s = settings(REPLICAS, venv=sys.prefix, state_dir=str(tmp_path), env_file=str(env_file), bind="127.0.0.1",
                         port=port, database_url=f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}")
            procs.append(_start(_unit_service(deploy.render_unit(s)), env_file))
            bases.append(f"http://127.0.0.1:{port}")
        for base, proc in zip(bases, procs, strict=True):
            _wait_healthy(base, proc)
            deadline = time.monotonic() + 60
            while requests.get(f"{base}/readyz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "replica never ready"
                time.sleep(0.2)
        auth = {"Authorization": "Bearer test-key-0123456789abcdef"}
        made = requests.post(f"{bases[0]}/v1/memories", headers=auth, timeout=30,
                             json={"text": "Bay 7 holds the spare pumps", "user": "ops"})
        assert made.status_code == 200, made.text
        got = requests.get(f"{bases[1]}/v1/memories/{made.json()['id']}", headers=auth, timeout=30)
        assert got.status_code == 200 and got.json()["text"] == "Bay 7 holds the spare pumps"
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
        with psycopg.connect(split_dsn(dsn)[0], autocommit=True) as con:
            for (name,) in con.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                       [f"{schema}\\_%"]).fetchall():
                con.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
