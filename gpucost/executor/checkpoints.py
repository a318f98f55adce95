"""Checkpoints shipped off the machine during the run, and found again to resume.

A target is ``local:<dir>`` (a folder, relative to the job's workdir unless absolute) or
``s3://bucket/prefix`` (boto3; ``AWS_ENDPOINT_URL_S3`` points it elsewhere). Checkpoints of a
job live under ``<target>/<job name>/epoch-000003.pt``; the newest epoch is the one to resume
from. Local copies go through a temporary file and a rename, so a kill mid-copy never leaves a
truncated "latest" checkpoint.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gpucost.errors import InputError, ProviderError

_NAME = re.compile(r"^epoch-(\d{6,})\.pt$")
KEEP_LOCAL = 3  # checkpoints kept in a local target; older ones are deleted


def checkpoint_name(epoch: int) -> str:
    return f"epoch-{epoch:06d}.pt"


class CheckpointStore:
    def __init__(self, target: str, *, namespace: str, base_dir: Path | None = None) -> None:
        self.target = target
        self.namespace = namespace
        if target.startswith("local:"):
            folder = Path(target[len("local:"):]).expanduser()
            if not folder.is_absolute():
                folder = (base_dir or Path.cwd()) / folder
            self.local_dir: Path | None = folder / namespace
            self.bucket = self.prefix = ""
        elif target.startswith("s3://"):
            self.local_dir = None
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
        if self.local_dir is not None:
            return f"local:{self.local_dir.parent}"
        return self.target

    def _s3(self) -> Any:
        import boto3

        return boto3.client("s3")

    def ship(self, path: Path, epoch: int) -> str:
        """Copy one checkpoint to the target; returns where it went."""
        name = checkpoint_name(epoch)
        if self.local_dir is not None:
            self.local_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=self.local_dir)
            try:
                with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.local_dir / name)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            for old in self._local_epochs()[:-KEEP_LOCAL]:
                (self.local_dir / checkpoint_name(old)).unlink(missing_ok=True)
            return str(self.local_dir / name)
        key = f"{self.prefix}/{name}"
        try:
            self._s3().upload_file(str(path), self.bucket, key)
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

    def latest_epoch(self) -> int | None:
        if self.local_dir is not None:
            epochs = self._local_epochs()
            return epochs[-1] if epochs else None
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
        return max(epochs) if epochs else None

    def fetch_latest(self, dest_dir: Path) -> Path | None:
        """Put the newest checkpoint in ``dest_dir`` (or point at it locally); None if none."""
        epoch = self.latest_epoch()
        if epoch is None:
            return None
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
