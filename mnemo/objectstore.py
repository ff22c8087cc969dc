"""Object storage behind one small interface: a local directory, Alibaba Cloud OSS (oss2), or S3 (boto3).

    store = open_store("/var/lib/mnemo/archive")     # a local directory (also file:///...)
    store = open_store("oss://bucket/mnemo")         # OSS through oss2, V4 signatures
    store = open_store("s3://bucket/mnemo")          # any S3-compatible endpoint, OSS's included
    info = store.put("runs/r1/results.parquet", path)  # sha256 travels with the object
    store.get("runs/r1/results.parquet", dest)         # raises ChecksumMismatch if the bytes differ

Every upload records the file's sha256 in the object's metadata and sends each
request body with its Content-MD5, so the server refuses a body damaged in transit
and a download is checked against the sha256 taken before upload. Files larger than
`part_size` go up in parts; a checkpoint file remembers the upload id, and a later
`put` of the same file lists the parts the server already holds, keeps those whose
MD5 matches, and sends only the rest. Secrets come only from the environment, read
by `open_store` when it is called (never at import).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from .errors import ConfigError, InvalidInput, MnemoError, NotFound

MiB = 1 << 20
_BLOCK = MiB  # read and hash files in 1 MiB blocks
_META = ".mnemo"  # the local store's folder for checksums and partial uploads


class ObjectStoreError(MnemoError):
    """An object store cannot be reached, or refused a request (credentials, permissions)."""


class ChecksumMismatch(ObjectStoreError):
    """Bytes read back from an object store differ from what was written."""


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: its key (relative to the store's prefix), size and sha256."""

    key: str
    size: int
    sha256: str | None
    resumed_bytes: int = 0  # bytes a resumed upload did not have to send again


def file_sha256(path: str | Path) -> str:
    """Return the hex sha256 of a file."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def _etag(value: str) -> str:
    """Normalise an ETag for comparison: S3 quotes lowercase hex, OSS quotes uppercase."""
    return value.strip().strip('"').lower()


def check_key(key: str) -> str:
    """Return `key` if it is a safe relative object key, else raise InvalidInput."""
    parts = key.split("/") if isinstance(key, str) else []
    if not key or key.startswith("/") or "\\" in key or "\x00" in key or any(p in ("", ".", "..") for p in parts):
        raise InvalidInput(f"bad object key {key!r}: use a relative path like 'archive/run/part.parquet'")
    if parts[0] == _META:
        raise InvalidInput(f"object keys may not start with {_META!r} (the local store keeps its checksums there)")
    return key


class ObjectStore:
    """The interface every adapter implements; byte helpers and read-back checks are shared."""

    url: str

    def put(self, key: str, path: str | Path) -> ObjectInfo:
        """Upload a file under `key` with its sha256; large files go up in resumable parts."""
        raise NotImplementedError

    def get(self, key: str, dest: str | Path) -> ObjectInfo:
        """Download `key` to `dest`, replacing it only if the bytes match the recorded sha256."""
        raise NotImplementedError

    def head(self, key: str) -> ObjectInfo | None:
        """Return the object's size and recorded sha256, or None if there is no such object."""
        raise NotImplementedError

    def list(self, prefix: str = "") -> list[str]:
        """Return the keys under `prefix`, sorted."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Remove an object (a missing one is not an error)."""
        raise NotImplementedError

    def signed_url(self, key: str, expires: int = 3600) -> str:
        """Return a URL that lets its holder GET the object until it expires."""
        raise NotImplementedError

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Upload `data` under `key` (through a temp file, so it takes the same checked path)."""
        with _scratch() as tmp:
            path = tmp / "blob"
            path.write_bytes(data)
            return self.put(key, path)

    def get_bytes(self, key: str) -> bytes:
        """Return the verified contents of `key`."""
        with _scratch() as tmp:
            self.get(key, tmp / "blob")
            return (tmp / "blob").read_bytes()

    def verify(self, key: str, sha256: str) -> ObjectInfo:
        """Read the object back in full and return its info if its bytes hash to `sha256`; else raise."""
        with _scratch() as tmp:
            info = self.get(key, tmp / "blob")
            actual = file_sha256(tmp / "blob")
        if actual != sha256 or info.sha256 != sha256:
            raise ChecksumMismatch(f"{self.url}/{key}: read back sha256 {actual}, expected {sha256}; upload it again")
        return info


@contextmanager
def _scratch() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-obj-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _download(chunks: Iterator[bytes], dest: Path, expected: str | None, where: str) -> str:
    """Stream `chunks` into `dest` through a side file, renaming only after the sha256 matches."""
    if not expected:
        raise ChecksumMismatch(f"{where} has no recorded sha256, so it cannot be verified; upload it with mnemo")
    dest.parent.mkdir(parents=True, exist_ok=True)
    side = dest.with_name(dest.name + ".download")
    digest = hashlib.sha256()
    with side.open("wb") as fh:
        for chunk in chunks:
            digest.update(chunk)
            fh.write(chunk)
    if digest.hexdigest() != expected:
        side.unlink()
        raise ChecksumMismatch(f"{where}: downloaded sha256 {digest.hexdigest()} differs from recorded {expected}")
    os.replace(side, dest)
    return expected


class LocalStore(ObjectStore):
    """A directory: objects are files; sha256 sidecars and partial copies live under `.mnemo/`."""

    def __init__(self, root: str | Path):
        # The folder is made by the first put, so a dry run or a read leaves no trace.
        self.root = Path(root).expanduser().resolve()
        self.url = self.root.as_uri()

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _sidecar(self, key: str) -> Path:
        return self.root / _META / "sha256" / f"{key}.json"

    def _append(self, out, block: bytes) -> None:
        out.write(block)

    def put(self, key: str, path: str | Path) -> ObjectInfo:
        src, dest = Path(path), self._path(key)
        digest, size = file_sha256(src), src.stat().st_size
        # A partial copy is named for the key and the source's hash, so it is only ever resumed with the same bytes.
        part = self.root / _META / "partial" / f"{hashlib.sha256(f'{key}|{digest}'.encode()).hexdigest()[:32]}.part"
        part.parent.mkdir(parents=True, exist_ok=True)
        resumed = part.stat().st_size if part.exists() and part.stat().st_size <= size else 0
        with src.open("rb") as fin, part.open("r+b" if resumed else "wb") as out:
            fin.seek(resumed)
            out.seek(resumed)
            out.truncate()
            for block in iter(lambda: fin.read(_BLOCK), b""):
                self._append(out, block)
            out.flush()
            os.fsync(out.fileno())
        if file_sha256(part) != digest:
            part.unlink()
            raise ChecksumMismatch(f"copy of {src} to {dest} does not hash to {digest}; the source changed? retry")
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, dest)
        side = self._sidecar(key)
        side.parent.mkdir(parents=True, exist_ok=True)
        side.write_text(json.dumps({"sha256": digest, "size": size}))
        return ObjectInfo(key, size, digest, resumed_bytes=resumed)

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        if not path.is_file():
            return None
        side = self._sidecar(key)
        sha = json.loads(side.read_text())["sha256"] if side.exists() else None
        return ObjectInfo(key, path.stat().st_size, sha)

    def get(self, key: str, dest: str | Path) -> ObjectInfo:
        info = self.head(key)
        if info is None:
            raise NotFound(f"no object {key!r} in {self.url}")
        with self._path(key).open("rb") as fh:
            _download(iter(lambda: fh.read(_BLOCK), b""), Path(dest), info.sha256, f"{self.url}/{key}")
        return info

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root).as_posix()
            if path.is_file() and not rel.startswith(_META + "/") and rel.startswith(prefix):
                keys.append(rel)
        return sorted(keys)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)
        self._sidecar(key).unlink(missing_ok=True)

    def signed_url(self, key: str, expires: int = 3600) -> str:
        # A local file has no signing authority: file permissions guard it, so the URL is plain.
        return self._path(key).as_uri()


class _Remote(ObjectStore):
    """Shared upload logic of the remote adapters: small puts, resumable multipart, checksummed gets."""

    def __init__(self, url: str, prefix: str, part_size: int, checkpoint_dir: str | Path | None):
        self.url = url.rstrip("/")
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.part_size = int(part_size)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else Path.home() / ".cache" / "mnemo" / "uploads"

    def _full(self, key: str) -> str:
        return self.prefix + check_key(key)

    # The primitives each adapter implements (full keys, no prefix handling).
    def _put_small(self, key: str, data: bytes, md5: str, sha256: str) -> None: raise NotImplementedError
    def _init_multipart(self, key: str, sha256: str) -> str: raise NotImplementedError
    def _upload_part(self, key: str, upload_id: str, n: int, data: bytes, md5: str) -> str: raise NotImplementedError
    def _list_parts(self, key: str, upload_id: str) -> dict[int, str] | None: raise NotImplementedError
    def _complete(self, key: str, upload_id: str, etags: dict[int, str]) -> None: raise NotImplementedError
    def _open(self, key: str) -> tuple[Iterator[bytes], int, str | None]: raise NotImplementedError

    def put(self, key: str, path: str | Path) -> ObjectInfo:
        path, full = Path(path), self._full(key)
        size, digest = path.stat().st_size, file_sha256(path)
        if size <= self.part_size:
            data = path.read_bytes()
            self._put_small(full, data, _md5_b64(data), digest)
            return ObjectInfo(key, size, digest)
        return ObjectInfo(key, size, digest, resumed_bytes=self._put_parts(full, path, size, digest))

    def _put_parts(self, full: str, path: Path, size: int, digest: str) -> int:
        """Upload in parts, resuming an earlier attempt at the same bytes; return the bytes not re-sent."""
        ckpt = self.checkpoint_dir / f"{hashlib.sha256(f'{self.url}|{full}'.encode()).hexdigest()[:32]}.json"
        state = json.loads(ckpt.read_text()) if ckpt.exists() else {}
        done: dict[int, str] | None = None
        if state.get("sha256") == digest and state.get("part_size") == self.part_size:
            # The server's own list decides what is done: a part counts only if its ETag is our bytes' MD5.
            done = self._list_parts(full, state["upload_id"])
        if done is None:
            state = {"upload_id": self._init_multipart(full, digest), "sha256": digest, "part_size": self.part_size}
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            ckpt.write_text(json.dumps(state))
            done = {}
        etags, reused = {}, 0
        with path.open("rb") as fh:
            for n in range(1, -(-size // self.part_size) + 1):
                data = fh.read(self.part_size)
                md5 = hashlib.md5(data, usedforsecurity=False)
                if n in done and _etag(done[n]) == md5.hexdigest():
                    etags[n], reused = done[n], reused + len(data)
                    continue
                etags[n] = self._upload_part(full, state["upload_id"], n, data, base64.b64encode(md5.digest()).decode())
        self._complete(full, state["upload_id"], etags)
        ckpt.unlink(missing_ok=True)
        return reused

    def get(self, key: str, dest: str | Path) -> ObjectInfo:
        chunks, size, sha = self._open(self._full(key))
        _download(chunks, Path(dest), sha, f"{self.url}/{key}")
        return ObjectInfo(key, size, sha)


class S3Store(_Remote):
    """An S3-compatible bucket through boto3 (SigV4): AWS, OSS's S3 endpoint, SeaweedFS, MinIO."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint: str | None, region: str, access_key: str,
                 secret_key: str, addressing_style: str = "auto", part_size: int = 8 * MiB,
                 checkpoint_dir: str | Path | None = None):
        import boto3
        from botocore.config import Config

        super().__init__(f"s3://{bucket}/{prefix.strip('/')}", prefix, part_size, checkpoint_dir)
        if addressing_style == "auto":
            # OSS's S3 endpoint only takes virtual-hosted requests; local test servers only take path style.
            addressing_style = "virtual" if endpoint and "aliyuncs.com" in endpoint else "path"
        # Newer botocore adds CRC32 trailers by default, which S3-compatible servers (OSS included) may
        # reject; Content-MD5 on every body plus the sha256 metadata already cover integrity.
        config = Config(signature_version="s3v4", s3={"addressing_style": addressing_style},
                        request_checksum_calculation="when_required", response_checksum_validation="when_required",
                        retries={"max_attempts": 3, "mode": "standard"})
        self.bucket = bucket
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name=region, aws_access_key_id=access_key,
            aws_secret_access_key=secret_key, config=config)

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise NotFound(f"no object {key!r} in {self.url}") from exc
            if code in ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403", "InvalidToken"):
                raise ObjectStoreError(f"{self.url} refused the request ({code}); check AWS_ACCESS_KEY_ID and "
                                       "AWS_SECRET_ACCESS_KEY and the key's permissions") from exc
            raise ObjectStoreError(f"{self.url}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise ObjectStoreError(f"cannot reach {self.url}: {exc}") from exc

    def _put_small(self, key, data, md5, sha256):
        with self._errors(key):
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentMD5=md5, Metadata={"sha256": sha256})

    def _init_multipart(self, key, sha256):
        with self._errors(key):
            return self.client.create_multipart_upload(Bucket=self.bucket, Key=key, Metadata={"sha256": sha256})["UploadId"]

    def _upload_part(self, key, upload_id, n, data, md5):
        with self._errors(key):
            return self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=data,
                                           ContentMD5=md5)["ETag"]

    def _list_parts(self, key, upload_id):
        from botocore.exceptions import ClientError

        try:
            pages = self.client.get_paginator("list_parts").paginate(Bucket=self.bucket, Key=key, UploadId=upload_id)
            return {p["PartNumber"]: p["ETag"] for page in pages for p in page.get("Parts", [])}
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchUpload", "404"):
                return None  # the upload expired or was completed: start a new one
            with self._errors(key):
                raise

    def _complete(self, key, upload_id, etags):
        parts = [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]
        with self._errors(key):
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                  MultipartUpload={"Parts": parts})

    def _open(self, key):
        with self._errors(key):
            resp = self.client.get_object(Bucket=self.bucket, Key=key)
        return resp["Body"].iter_chunks(_BLOCK), resp["ContentLength"], resp.get("Metadata", {}).get("sha256")

    def head(self, key: str) -> ObjectInfo | None:
        try:
            with self._errors(key):
                resp = self.client.head_object(Bucket=self.bucket, Key=self._full(key))
        except NotFound:
            return None
        return ObjectInfo(key, resp["ContentLength"], resp.get("Metadata", {}).get("sha256"))

    def list(self, prefix: str = "") -> list[str]:
        with self._errors(prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix)
            return sorted(o["Key"][len(self.prefix):] for page in pages for o in page.get("Contents", []))

    def delete(self, key: str) -> None:
        with self._errors(key):
            self.client.delete_object(Bucket=self.bucket, Key=self._full(key))

    def signed_url(self, key: str, expires: int = 3600) -> str:
        return self.client.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": self._full(key)},
                                                  ExpiresIn=int(expires))


class OSSStore(_Remote):
    """An Alibaba Cloud OSS bucket through oss2 with V4 signatures (OSS's own, not S3's)."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint: str, region: str, access_key: str,
                 secret_key: str, part_size: int = 8 * MiB, checkpoint_dir: str | Path | None = None):
        import oss2

        super().__init__(f"oss://{bucket}/{prefix.strip('/')}", prefix, part_size, checkpoint_dir)
        self.bucket = oss2.Bucket(oss2.AuthV4(access_key, secret_key), endpoint, bucket, region=region)

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        import oss2

        try:
            yield
        except (oss2.exceptions.NoSuchKey, oss2.exceptions.NotFound) as exc:
            raise NotFound(f"no object {key!r} in {self.url}") from exc
        except oss2.exceptions.ServerError as exc:
            if exc.status == 403:
                raise ObjectStoreError(f"{self.url} refused the request ({exc.code}); check OSS_ACCESS_KEY_ID, "
                                       "OSS_ACCESS_KEY_SECRET, OSS_REGION and the key's permissions") from exc
            raise ObjectStoreError(f"{self.url}: {exc.code} ({exc.status})") from exc
        except oss2.exceptions.RequestError as exc:
            raise ObjectStoreError(f"cannot reach {self.url}: {exc}") from exc

    def _put_small(self, key, data, md5, sha256):
        with self._errors(key):
            self.bucket.put_object(key, data, headers={"Content-MD5": md5, "x-oss-meta-sha256": sha256})

    def _init_multipart(self, key, sha256):
        with self._errors(key):
            return self.bucket.init_multipart_upload(key, headers={"x-oss-meta-sha256": sha256}).upload_id

    def _upload_part(self, key, upload_id, n, data, md5):
        with self._errors(key):
            return self.bucket.upload_part(key, upload_id, n, data, headers={"Content-MD5": md5}).etag

    def _list_parts(self, key, upload_id):
        import oss2

        try:
            with self._errors(key):
                return {p.part_number: p.etag for p in oss2.PartIterator(self.bucket, key, upload_id)}
        except NotFound as exc:
            if isinstance(exc.__cause__, oss2.exceptions.NoSuchUpload):
                return None  # the upload expired or was completed: start a new one
            raise

    def _complete(self, key, upload_id, etags):
        import oss2

        with self._errors(key):
            self.bucket.complete_multipart_upload(key, upload_id, [oss2.models.PartInfo(n, etags[n]) for n in sorted(etags)])

    def _open(self, key):
        with self._errors(key):
            resp = self.bucket.get_object(key)
        return iter(lambda: resp.read(_BLOCK), b""), resp.content_length, resp.headers.get("x-oss-meta-sha256")

    def head(self, key: str) -> ObjectInfo | None:
        try:
            with self._errors(key):
                resp = self.bucket.head_object(self._full(key))
        except NotFound:
            return None
        return ObjectInfo(key, resp.content_length, resp.headers.get("x-oss-meta-sha256"))

    def list(self, prefix: str = "") -> list[str]:
        import oss2

        with self._errors(prefix):
            return sorted(o.key[len(self.prefix):] for o in oss2.ObjectIteratorV2(self.bucket, prefix=self.prefix + prefix))

    def delete(self, key: str) -> None:
        with self._errors(key):
            self.bucket.delete_object(self._full(key))

    def signed_url(self, key: str, expires: int = 3600) -> str:
        return self.bucket.sign_url("GET", self._full(key), int(expires), slash_safe=True)


def _need(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        if env.get(name):
            return env[name]
    raise ConfigError(f"set {' or '.join(names)} in the environment (secrets and endpoints are read only from there)")


def open_store(url: str | Path, *, env: Mapping[str, str] | None = None, **options) -> ObjectStore:
    """Return the object store for `url`: a path or file:// URL, oss://BUCKET/PREFIX or s3://BUCKET/PREFIX.

    oss:// reads OSS_ENDPOINT (https://oss-REGION.aliyuncs.com), OSS_REGION (derived from the
    endpoint when unset) and OSS_ACCESS_KEY_ID / OSS_ACCESS_KEY_SECRET (or ALIBABA_CLOUD_ACCESS_KEY_*).
    s3:// reads MNEMO_S3_ENDPOINT or AWS_ENDPOINT_URL (unset: AWS itself), AWS_REGION
    (default us-east-1) and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. `options` go to the
    adapter (part_size, checkpoint_dir, addressing_style).
    """
    env = os.environ if env is None else env
    text = str(url)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # a one-letter scheme is a Windows drive
        return LocalStore(parsed.path if parsed.scheme == "file" else text)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
    if not bucket:
        raise ConfigError(f"{text}: name a bucket, as in {parsed.scheme}://my-bucket/mnemo")
    if parsed.scheme == "oss":
        endpoint = _need(env, "OSS_ENDPOINT")
        host = urlparse(endpoint if "//" in endpoint else f"https://{endpoint}").hostname or ""
        derived = host.split(".")[0].removeprefix("oss-").removesuffix("-internal") if host.startswith("oss-") else ""
        region = env.get("OSS_REGION") or derived
        if not region:
            raise ConfigError("set OSS_REGION (e.g. cn-hangzhou): OSS V4 signatures need the region")
        return OSSStore(bucket, prefix, endpoint=endpoint, region=region,
                        access_key=_need(env, "OSS_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_ID"),
                        secret_key=_need(env, "OSS_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"), **options)
    if parsed.scheme == "s3":
        return S3Store(bucket, prefix, endpoint=env.get("MNEMO_S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL"),
                       region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
                       access_key=_need(env, "AWS_ACCESS_KEY_ID"), secret_key=_need(env, "AWS_SECRET_ACCESS_KEY"),
                       **options)
    raise ConfigError(f"unknown object store {text!r}; use a path, file://PATH, oss://BUCKET/PREFIX or s3://BUCKET/PREFIX")
