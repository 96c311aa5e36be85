"""S3 and S3-compatible stores, through boto3 and s3transfer.

Ranged GETs are pinned to the ETag seen, so an object replaced mid-download is refused, not
mixed. Retries belong to the disk tier, so botocore tries once.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from modelhost.cache.stores.base import (
    LIST_PAGE_KEYS,
    SILENT,
    KeyedByPath,
    ObjectInfo,
    Progress,
    is_disk_full,
    page_of,
    validate_name,
)
from modelhost.errors import (
    ModelhostError,
    ModelNotFound,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)

MISSING = {"404", "NoSuchKey", "NotFound"}
TRANSIENT = {"500", "502", "503", "504", "SlowDown", "InternalError", "ServiceUnavailable"}
TRANSIENT |= {"RequestTimeout", "PreconditionFailed", "412", "Throttling", "ThrottlingException"}
DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}
MB = 1024 * 1024


class S3Client:
    """One boto3 client and transfer manager, shared by every S3 store of the server."""

    def __init__(self, timeout_s: float, max_concurrent_downloads: int) -> None:
        import boto3
        from botocore.config import Config
        from s3transfer.manager import TransferConfig, TransferManager

        config = Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"mode": "standard", "total_max_attempts": 1},  # max_attempts counts retries
            max_pool_connections=10 * max_concurrent_downloads,
        )
        self.client: Any = boto3.session.Session().client("s3", config=config)
        transfer = TransferConfig(
            multipart_threshold=8 * MB, multipart_chunksize=8 * MB, num_download_attempts=1
        )
        self.transfers = TransferManager(self.client, transfer)

    async def aclose(self) -> None:
        self.transfers.shutdown(cancel=True)


class S3Store(KeyedByPath):
    """Artifacts under an S3 bucket and prefix, through the server's shared boto3 client."""

    listable = True

    def __init__(self, bucket: str, prefix: str, s3: S3Client) -> None:
        self.bucket, self.prefix, self.s3 = bucket, prefix.strip("/"), s3
        self.uri = f"s3://{bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def _object_key(self, key: str) -> str:
        return f"{self.prefix}/{validate_name(key)}" if self.prefix else validate_name(key)

    async def stat(self, key: str) -> ObjectInfo:
        call = functools.partial(
            self.s3.client.head_object, Bucket=self.bucket, Key=self._object_key(key)
        )
        head = await self._run(key, call)
        etag = head["ETag"].strip('"')
        encrypted = head.get("ServerSideEncryption") == "aws:kms" or "SSECustomerAlgorithm" in head
        plain_md5 = len(etag) == 32 and "-" not in etag and not encrypted
        return ObjectInfo(int(head["ContentLength"]), etag, etag if plain_md5 else None)

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        subscriber = _Subscriber(expected, progress)
        future = self.s3.transfers.download(
            self.bucket, self._object_key(key), str(dest), subscribers=[subscriber]
        )
        try:
            await self._run(key, future.result)
        except BaseException:
            future.cancel()
            raise

    async def list_keys(self, after: str = "", limit: int = LIST_PAGE_KEYS) -> list[str]:
        keys: list[str] = await self._run("", functools.partial(self._list, after, limit))
        return keys

    def _list(self, after: str, limit: int) -> list[str]:
        """S3 lists in UTF-8 byte order, which is Python's order of the names."""
        folder = f"{self.prefix}/" if self.prefix else ""
        pages = self.s3.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=folder, StartAfter=folder + after if after else ""
        )
        keys = (obj["Key"][len(folder) :] for page in pages for obj in page.get("Contents", ()))
        return page_of(keys, after, limit)

    async def _run(self, key: str, call: Any) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, call)
        except ModelhostError:
            raise
        except Exception as error:
            if is_disk_full(error):
                raise
            raise translate(error, self.url_of(key) if key else self.uri) from error


class _Subscriber:
    """Hands s3transfer the known size and ETag, saving a HEAD, and reports progress."""

    def __init__(self, expected: ObjectInfo, progress: Progress) -> None:
        self.expected, self.progress = expected, progress

    def on_queued(self, future: Future[Any], **kwargs: Any) -> None:
        if self.expected.size is not None:
            future.meta.provide_transfer_size(self.expected.size)  # type: ignore[attr-defined]
        if self.expected.etag:
            future.meta.provide_object_etag(self.expected.etag)  # type: ignore[attr-defined]

    def on_progress(self, future: Future[Any], bytes_transferred: int, **kwargs: Any) -> None:
        self.progress(bytes_transferred)


def translate(error: Exception, url: str) -> ModelhostError:
    """A boto3 or s3transfer exception as the error tree's, with the store's own words."""
    from botocore import exceptions as boto
    from s3transfer.exceptions import RetriesExceededError

    if isinstance(error, RetriesExceededError) and isinstance(error.last_exception, Exception):
        return translate(error.last_exception, url)
    if isinstance(error, boto.ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = error.response.get("Error", {}).get("Message") or code
        if code in MISSING:
            return ModelNotFound(f"{url} does not exist in the store; check the model name")
        if code in DENIED:
            return StoreError(
                f"the store refused {url}: {code}: {message}; check the AWS credentials "
                "(AWS_PROFILE, AWS_ACCESS_KEY_ID, the instance role) and that they may read it"
            )
        kind = StoreUnavailable if code in TRANSIENT else StoreError
        return kind(f"the store refused {url}: {code}: {message}")
    if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError):
        return StoreError(
            f"no AWS credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE, or give the instance a role"
        )
    if isinstance(error, boto.ReadTimeoutError):
        return StoreTimeout(f"the store stopped sending {url}: {error}{SILENT}")
    if isinstance(error, boto.BotoCoreError | OSError):
        return StoreUnavailable(f"cannot reach the store for {url}: {error}")
    return StoreError(f"the store failed on {url}: {type(error).__name__}: {error}")
