"""Checkpoints shipped off the machine during the run, and found again to resume.

A target is ``local:<dir>`` (a folder, relative to the job's workdir unless absolute) or
``s3://bucket/prefix`` (boto3; ``AWS_ENDPOINT_URL_S3`` points it elsewhere). Checkpoints of a
job live under ``<target>/<job name>/epoch-000003.pt``; the newest epoch is the one to resume
from. Local copies go through a temporary file and a rename, so a kill mid-copy never leaves a
truncated "latest" checkpoint.

Each checkpoint ships with a manifest (``epoch-000003.pt.json``: size and SHA-256), written
before the checkpoint itself. Resuming takes the newest checkpoint that matches its manifest (or,
for one without, that opens as the zip archive torch.save writes), so one truncated or damaged
file costs an epoch, not the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from gpucost._io import atomic_open, atomic_write_json
from gpucost._optional import require
from gpucost.errors import InputError, ProviderError
from gpucost.jobname import NAME_HINT, job_name_problem

_NAME = re.compile(r"^epoch-(\d{6,})\.pt$")
KEEP_LOCAL = 3  # checkpoints kept in a local target; older ones are deleted


def checkpoint_name(epoch: int) -> str:
    return f"epoch-{epoch:06d}.pt"


def manifest_name(epoch: int) -> str:
    return checkpoint_name(epoch) + ".json"


def _copy_hashing(src: Path, out: BinaryIO) -> dict[str, Any]:
    """Copy ``src`` into ``out`` and return its manifest: size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    with open(src, "rb") as inp:
        while chunk := inp.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def _hash_file(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as inp:
        while chunk := inp.read(1 << 20):
            digest.update(chunk)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def unreadable_because(path: Path, manifest: dict[str, Any] | None) -> str | None:
    """Why the checkpoint at ``path`` cannot be resumed from, or None when it looks whole."""
    try:
        size = path.stat().st_size
        if manifest is not None:
            if size != manifest.get("size"):
                return f"{size} bytes where {manifest.get('size')} were shipped (truncated)"
            if _hash_file(path)["sha256"] != manifest.get("sha256"):
                return "its SHA-256 differs from the one shipped (damaged)"
            return None
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as f:
                head = f.read(4)
            # torch.save writes a zip archive; a file that starts like one but no longer opens
            # as one is cut short. Other formats without a manifest cannot be checked.
            return "a zip archive (torch.save) cut short" if head == b"PK\x03\x04" else None
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
        return None if bad is None else f"member {bad} of the archive is damaged"
    except (OSError, zipfile.BadZipFile) as err:
        return f"cannot read it: {err}"


class CheckpointStore:
    def __init__(self, target: str, *, namespace: str, base_dir: Path | None = None) -> None:
        if problem := job_name_problem(namespace):
            raise InputError(f"checkpoint namespace (the job name) {namespace!r} is refused: "
                             f"{problem}", hint=NAME_HINT)
        self.target = target
        self.namespace = namespace
        if target.startswith("local:"):
            folder = Path(target[len("local:"):]).expanduser()
            if not folder.is_absolute():
                folder = (base_dir or Path.cwd()) / folder
            self.local_root: Path | None = folder
            self.local_dir: Path | None = folder / namespace
            self.bucket = self.prefix = ""
        elif target.startswith("s3://"):
            self.local_root = self.local_dir = None
            bucket, _, prefix = target[len("s3://"):].partition("/")
            if not bucket:
                raise InputError(f"checkpoint target {target!r} has no bucket",
                                 hint="use s3://bucket/prefix")
            self.bucket = bucket
            self.prefix = "/".join(p for p in (prefix.strip("/"), namespace) if p)
        else:
            raise InputError(f"checkpoint target {target!r} is not understood",
                             hint="use local:<dir> or s3://bucket/prefix")

    @classmethod
    def from_env(cls) -> CheckpointStore:
        """The store a launcher described to the job through GPUCOST_CHECKPOINT_* variables."""
        return cls(os.environ["GPUCOST_CHECKPOINT_TARGET"],
                   namespace=os.environ.get("GPUCOST_CHECKPOINT_NAMESPACE", "job"))

    @property
    def resolved_target(self) -> str:
        """The target with local folders made absolute (for the job's environment)."""
        if self.local_root is not None:
            return f"local:{self.local_root}"
        return self.target

    def _s3(self) -> Any:
        return require("boto3", needed_for="an s3:// checkpoint target").client("s3")

    def ship(self, path: Path, epoch: int) -> str:
        """Copy one checkpoint to the target, its manifest first; returns where it went."""
        name = checkpoint_name(epoch)
        if self.local_dir is not None:
            # the shared atomic writer: whole files only, with the user's normal permissions;
            # the manifest lands before the checkpoint's rename
            with atomic_open(self.local_dir / name) as out:
                manifest = _copy_hashing(path, out)
                atomic_write_json(self.local_dir / manifest_name(epoch), manifest)
            for old in self._local_epochs()[:-KEEP_LOCAL]:
                (self.local_dir / checkpoint_name(old)).unlink(missing_ok=True)
                (self.local_dir / manifest_name(old)).unlink(missing_ok=True)
            return str(self.local_dir / name)
        key = f"{self.prefix}/{name}"
        s3 = self._s3()  # outside the try: a missing boto3 is an install step, not an upload error
        try:
            s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{manifest_name(epoch)}",
                          Body=json.dumps(_hash_file(path)).encode())
            s3.upload_file(str(path), self.bucket, key)
        except Exception as err:  # botocore raises many unrelated types
            raise ProviderError(f"cannot upload checkpoint to s3://{self.bucket}/{key}: {err}",
                                hint="check the bucket exists and credentials allow PutObject"
                                ) from err
        return f"s3://{self.bucket}/{key}"

    def _local_epochs(self) -> list[int]:
        assert self.local_dir is not None
        if not self.local_dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.local_dir.iterdir()
                      if (m := _NAME.match(p.name)))

    def epochs(self) -> list[int]:
        """The epochs shipped to the target, oldest first."""
        if self.local_dir is not None:
            return self._local_epochs()
        paginator = self._s3().get_paginator("list_objects_v2")
        epochs = []
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + "/"):
                for obj in page.get("Contents", []):
                    if m := _NAME.match(obj["Key"].rsplit("/", 1)[-1]):
                        epochs.append(int(m.group(1)))
        except Exception as err:
            raise ProviderError(f"cannot list checkpoints in s3://{self.bucket}/{self.prefix}: "
                                f"{err}") from err
        return sorted(epochs)

    def latest_epoch(self) -> int | None:
        epochs = self.epochs()
        return epochs[-1] if epochs else None

    def fetch_latest(self, dest_dir: Path,
                     skipped: Callable[[str], None] = lambda _why: None) -> Path | None:
        """Put the newest readable checkpoint in ``dest_dir`` (or point at it locally); None if
        there is none. Each newer one passed over is told to ``skipped`` with the reason."""
        for epoch in reversed(self.epochs()):
            name = checkpoint_name(epoch)
            path = self._local_copy(epoch, dest_dir)
            why = unreadable_because(path, self._manifest(epoch))
            if why is None:
                return path
            skipped(f"checkpoint {name} is unreadable ({why}); trying the one before")
        return None

    def _local_copy(self, epoch: int, dest_dir: Path) -> Path:
        name = checkpoint_name(epoch)
        if self.local_dir is not None:
            return self.local_dir / name
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / name
        try:
            self._s3().download_file(self.bucket, f"{self.prefix}/{name}", str(dest))
        except Exception as err:
            raise ProviderError(f"cannot download s3://{self.bucket}/{self.prefix}/{name}: "
                                f"{err}") from err
        return dest

    def _manifest(self, epoch: int) -> dict[str, Any] | None:
        """The manifest shipped with ``epoch``, or None (older checkpoints have none)."""
        try:
            if self.local_dir is not None:
                text = (self.local_dir / manifest_name(epoch)).read_text()
            else:
                body = self._s3().get_object(Bucket=self.bucket,
                                             Key=f"{self.prefix}/{manifest_name(epoch)}")["Body"]
                text = body.read().decode()
            data = json.loads(text)
        except Exception:  # missing, unreadable or not JSON: check the file on its own
            return None
        return data if isinstance(data, dict) else None
