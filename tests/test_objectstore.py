"""Object store contract: the same tests against a local directory, SeaweedFS's S3 gateway and a fake OSS.

SeaweedFS runs on loopback and checks SigV4 (headers and presigned URLs), Content-MD5
and expiry itself. OSS's own signature is checked by `objectstore_servers.FakeOSS`,
which re-derives OSS4-HMAC-SHA256 independently of oss2.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid

import pytest
import requests
from objectstore_servers import ACCESS, SECRET, FakeOSS

from mnemo.errors import ConfigError, InvalidInput, NotFound
from mnemo.objectstore import (
    ChecksumMismatch,
    LocalStore,
    MiB,
    ObjectStoreError,
    OSSStore,
    S3Store,
    file_sha256,
    open_store,
)

BUCKET = "mnemo-test"
REGION = "cn-test"


@pytest.fixture(scope="module")
def oss_server():
    with FakeOSS(region=REGION) as server:
        yield server


def make_store(kind: str, request, tmp_path, *, secret: str = SECRET, part_size: int = 5 * MiB):
    """Return a fresh store of `kind` under its own prefix, so tests do not see each other's objects."""
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    if kind == "local":
        return LocalStore(tmp_path / "objects")
    if kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        return S3Store(BUCKET, prefix, endpoint=endpoint, region="us-east-1", access_key=ACCESS, secret_key=secret,
                       part_size=part_size, checkpoint_dir=tmp_path / "ckpt")
    server = request.getfixturevalue("oss_server")
    return OSSStore(BUCKET, prefix, endpoint=server.endpoint, region=REGION, access_key=ACCESS, secret_key=secret,
                    part_size=part_size, checkpoint_dir=tmp_path / "ckpt")


@pytest.fixture(params=["local", "s3", "oss"])
def objects(request, tmp_path):
    return make_store(request.param, request, tmp_path)


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_put_get_head_list_delete(objects, tmp_path):
    src = write(tmp_path / "a.txt", b"Lead time for AX-7 is 14 days")
    info = objects.put("runs/r1/a.txt", src)
    assert info.sha256 == hashlib.sha256(src.read_bytes()).hexdigest() and info.size == src.stat().st_size
    assert objects.head("runs/r1/a.txt") == info
    assert objects.head("runs/r1/missing") is None
    objects.put_bytes("runs/r2/b.txt", b"second")
    assert objects.list() == ["runs/r1/a.txt", "runs/r2/b.txt"]
    assert objects.list("runs/r1/") == ["runs/r1/a.txt"]
    got = objects.get("runs/r1/a.txt", tmp_path / "out" / "a.txt")
    assert got.sha256 == info.sha256 and (tmp_path / "out" / "a.txt").read_bytes() == src.read_bytes()
    objects.delete("runs/r1/a.txt")
    objects.delete("runs/r1/a.txt")  # deleting twice is not an error
    assert objects.list() == ["runs/r2/b.txt"]
    with pytest.raises(NotFound):
        objects.get("runs/r1/a.txt", tmp_path / "gone")


def test_empty_and_binary_objects_round_trip(objects):
    assert objects.put_bytes("empty", b"").size == 0
    assert objects.get_bytes("empty") == b""
    blob = bytes(range(256)) * 41
    objects.put_bytes("bin/ü €.bin", blob)
    assert objects.get_bytes("bin/ü €.bin") == blob


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", "a\\b", ".mnemo/x"])
def test_bad_keys_are_refused(objects, key):
    with pytest.raises(InvalidInput):
        objects.put_bytes(key, b"x")


@pytest.mark.parametrize("kind", ["local", "s3", "oss"])
def test_large_upload_resumes_after_interruption(kind, request, tmp_path, monkeypatch):
    """An upload cut off midway sends only what the store does not already hold the second time."""
    objects = make_store(kind, request, tmp_path, part_size=5 * MiB if kind == "s3" else 256 * 1024)
    size = {"s3": 12 * MiB + 123, "oss": 1_000_000 + 7, "local": 3 * MiB + MiB // 2}[kind]
    src = write(tmp_path / "big.bin", os.urandom(size))
    sent: list[int] = []
    if kind == "local":
        original, method = LocalStore._append, "_append"
    else:
        original, method = type(objects)._upload_part, "_upload_part"

    def flaky(self, *args, **kwargs):
        sent.append(1)
        if len(sent) == 3:
            raise ConnectionError("network dropped")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(objects), method, flaky)
    with pytest.raises(ConnectionError):
        objects.put("big.bin", src)
    assert objects.head("big.bin") is None  # nothing half-written is visible
    monkeypatch.setattr(type(objects), method, original)
    info = objects.put("big.bin", src)
    assert info.resumed_bytes == 2 * (MiB if kind == "local" else objects.part_size)
    assert info.sha256 == file_sha256(src)
    objects.get("big.bin", tmp_path / "back.bin")
    assert file_sha256(tmp_path / "back.bin") == info.sha256


def test_resume_of_a_changed_file_starts_over(tmp_path, request):
    objects = make_store("oss", request, tmp_path, part_size=100_000)
    src = write(tmp_path / "f.bin", os.urandom(350_000))
    state = objects.checkpoint_dir
    original = OSSStore._upload_part
    calls = []

    def flaky(self, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("dropped")
        return original(self, *a, **k)

    OSSStore._upload_part = flaky
    try:
        with pytest.raises(ConnectionError):
            objects.put("f.bin", src)
    finally:
        OSSStore._upload_part = original
    assert list(state.iterdir())
    write(src, os.urandom(350_000))
    info = objects.put("f.bin", src)
    assert info.resumed_bytes == 0 and objects.get_bytes("f.bin") == src.read_bytes()
    assert not list(state.iterdir())  # the checkpoint is gone once the upload completes


@pytest.mark.parametrize("kind", ["s3", "oss"])
def test_resume_after_the_server_dropped_the_upload_starts_over(kind, request, tmp_path, monkeypatch):
    objects = make_store(kind, request, tmp_path, part_size=5 * MiB if kind == "s3" else 100_000)
    src = write(tmp_path / "f.bin", os.urandom(3 * objects.part_size - 5))
    original, calls = type(objects)._upload_part, []

    def flaky(self, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("dropped")
        return original(self, *a, **k)

    monkeypatch.setattr(type(objects), "_upload_part", flaky)
    with pytest.raises(ConnectionError):
        objects.put("f.bin", src)
    monkeypatch.setattr(type(objects), "_upload_part", original)
    state = json.loads(next(objects.checkpoint_dir.iterdir()).read_text())
    # The server forgets the upload (expired, or aborted by a lifecycle rule).
    if kind == "s3":
        objects.client.abort_multipart_upload(Bucket=BUCKET, Key=objects.prefix + "f.bin", UploadId=state["upload_id"])
    else:
        request.getfixturevalue("oss_server").uploads.pop(state["upload_id"])
    info = objects.put("f.bin", src)
    assert info.resumed_bytes == 0 and objects.get_bytes("f.bin") == src.read_bytes()


def tamper(objects, key: str, request) -> None:
    """Change an object's bytes behind the adapter's back, keeping its recorded sha256."""
    if isinstance(objects, LocalStore):
        (objects.root / key).write_bytes(b"tampered")
    elif isinstance(objects, S3Store):
        full = objects.prefix + key
        sha = objects.client.head_object(Bucket=BUCKET, Key=full)["Metadata"]["sha256"]
        objects.client.put_object(Bucket=BUCKET, Key=full, Body=b"tampered", Metadata={"sha256": sha})
    else:
        server = request.getfixturevalue("oss_server")
        data, meta = server.objects[(BUCKET, objects.prefix + key)]
        server.objects[(BUCKET, objects.prefix + key)] = (b"tampered", meta)


def test_download_refuses_bytes_that_do_not_match_the_checksum(objects, tmp_path, request):
    objects.put_bytes("doc.txt", b"original contents")
    dest = write(tmp_path / "doc.txt", b"what was here before")
    tamper(objects, "doc.txt", request)
    with pytest.raises(ChecksumMismatch):
        objects.get("doc.txt", dest)
    assert dest.read_bytes() == b"what was here before"  # the old file is left alone
    assert not list(tmp_path.glob("*.download"))
    with pytest.raises(ChecksumMismatch):
        objects.verify("doc.txt", hashlib.sha256(b"original contents").hexdigest())


@pytest.mark.parametrize("kind", ["s3", "oss"])
def test_wrong_secret_is_refused(kind, request, tmp_path):
    good = make_store(kind, request, tmp_path)
    good.put_bytes("x", b"secret data")
    bad = make_store(kind, request, tmp_path, secret="not-the-secret")
    bad.prefix = good.prefix
    for attempt in (lambda: bad.get_bytes("x"), lambda: bad.put_bytes("y", b"z"), lambda: bad.list(),
                    lambda: bad.head("x")):
        with pytest.raises(ObjectStoreError, match="refused"):
            attempt()
    assert good.list() == ["x"]


@pytest.mark.parametrize("kind", ["s3", "oss"])
def test_signed_url_works_and_tampering_is_refused(kind, request, tmp_path):
    objects = make_store(kind, request, tmp_path)
    objects.put_bytes("share/report.txt", b"shared")
    objects.put_bytes("share/private.txt", b"PRIVATE-CONTENT")
    url = objects.signed_url("share/report.txt", expires=120)
    assert requests.get(url, timeout=10).content == b"shared"
    sig = "X-Amz-Signature=" if kind == "s3" else "x-oss-signature="
    expires = ("X-Amz-Expires=120", "X-Amz-Expires=3600") if kind == "s3" else ("x-oss-expires=120", "x-oss-expires=3600")
    head, _, tail = url.partition(sig)
    forged = [
        head + sig + ("0" if tail[0] != "0" else "1") + tail[1:],  # one hex digit of the signature
        url.replace("report.txt", "private.txt"),  # another object
        url.replace(*expires),  # a longer life
    ]
    for bad in forged:
        assert bad != url
        resp = requests.get(bad, timeout=10)
        assert resp.status_code == 403 and b"PRIVATE-CONTENT" not in resp.content


@pytest.mark.parametrize("kind", ["s3", "oss"])
def test_expired_signed_url_is_refused(kind, request, tmp_path):
    objects = make_store(kind, request, tmp_path)
    objects.put_bytes("short.txt", b"brief")
    url = objects.signed_url("short.txt", expires=1)
    time.sleep(2.2)
    assert requests.get(url, timeout=10).status_code == 403


def test_s3_server_refuses_a_body_damaged_in_transit(request, tmp_path):
    objects = make_store("s3", request, tmp_path)
    wrong_md5 = base64.b64encode(hashlib.md5(b"other bytes").digest()).decode()
    with pytest.raises(ObjectStoreError, match="BadDigest"):
        objects._put_small(objects.prefix + "k", b"these bytes", wrong_md5, "0" * 64)
    assert objects.head("k") is None


def test_oss_requests_are_signed_v4_and_carry_checksums(request, tmp_path):
    """What oss2 sends, as the fake OSS recorded it: V4 auth, Content-MD5 on every body, sha256 metadata."""
    server = request.getfixturevalue("oss_server")
    objects = make_store("oss", request, tmp_path, part_size=100_000)
    start = len(server.requests)
    src = write(tmp_path / "m.bin", os.urandom(250_000))
    objects.put("m.bin", src)
    objects.put_bytes("s.txt", b"small")
    seen = server.requests[start:]
    assert [(r["method"], sorted(k for k in r["query"] if k != "partNumber")) for r in seen] == [
        ("POST", ["uploads"]), ("PUT", ["uploadId"]), ("PUT", ["uploadId"]), ("PUT", ["uploadId"]),
        ("POST", ["uploadId"]), ("PUT", [])]
    sha = file_sha256(src)
    for r in seen:
        headers = {k.lower(): v for k, v in r["headers"].items()}
        assert headers["authorization"].startswith(f"OSS4-HMAC-SHA256 Credential={ACCESS}/")
        assert f"/{REGION}/oss/aliyun_v4_request" in headers["authorization"]
        assert headers["x-oss-content-sha256"] == "UNSIGNED-PAYLOAD"
        if r["method"] == "PUT":
            assert headers["content-md5"]
        assert r["key"].startswith(objects.prefix)
    assert {k.lower(): v for k, v in seen[0]["headers"].items()}["x-oss-meta-sha256"] == sha
    assert [int(r["query"]["partNumber"]) for r in seen[1:4]] == [1, 2, 3]


def test_oss_refuses_a_wrong_region(request, tmp_path):
    server = request.getfixturevalue("oss_server")
    bad = OSSStore(BUCKET, "p", endpoint=server.endpoint, region="cn-elsewhere", access_key=ACCESS, secret_key=SECRET)
    with pytest.raises(ObjectStoreError, match="refused"):
        bad.put_bytes("x", b"y")


def test_open_store_reads_endpoints_and_secrets_from_the_environment(tmp_path):
    assert isinstance(open_store(tmp_path / "a"), LocalStore)
    assert isinstance(open_store((tmp_path / "b").as_uri()), LocalStore)
    oss = open_store("oss://bkt/mnemo/archive", env={
        "OSS_ENDPOINT": "https://oss-cn-hangzhou.aliyuncs.com", "OSS_ACCESS_KEY_ID": "ak", "OSS_ACCESS_KEY_SECRET": "sk"})
    assert isinstance(oss, OSSStore) and oss.prefix == "mnemo/archive/" and oss.bucket.region == "cn-hangzhou"
    s3 = open_store("s3://bkt/p", env={"MNEMO_S3_ENDPOINT": "https://oss-cn-hangzhou.aliyuncs.com",
                                       "AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk",
                                       "AWS_REGION": "oss-cn-hangzhou"})
    assert isinstance(s3, S3Store) and s3.client.meta.config.s3["addressing_style"] == "virtual"
    with pytest.raises(ConfigError, match="OSS_ACCESS_KEY_SECRET"):
        open_store("oss://bkt/p", env={"OSS_ENDPOINT": "https://oss-cn-hangzhou.aliyuncs.com",
                                       "OSS_ACCESS_KEY_ID": "ak"})
    with pytest.raises(ConfigError, match="OSS_REGION"):
        open_store("oss://bkt/p", env={"OSS_ENDPOINT": "https://oss.example.com", "OSS_ACCESS_KEY_ID": "a",
                                       "OSS_ACCESS_KEY_SECRET": "b"})
    with pytest.raises(ConfigError, match="AWS_ACCESS_KEY_ID"):
        open_store("s3://bkt/p", env={})
    with pytest.raises(ConfigError, match="bucket"):
        open_store("s3:///p", env={})
    with pytest.raises(ConfigError, match="unknown object store"):
        open_store("gs://bkt/p", env={})
