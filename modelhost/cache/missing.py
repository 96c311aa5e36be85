"""Names a remote store said it does not have, remembered briefly.

Otherwise a scan of made-up names sends the store a request per request.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from modelhost.errors import ModelNotFound

TTL_S = 5.0
MAX_URLS = 10_000


class MissingUrls:
    def __init__(
        self,
        ttl_s: float = TTL_S,
        max_urls: int = MAX_URLS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s, self.max_urls, self.clock = ttl_s, max_urls, clock
        self._until: OrderedDict[str, tuple[float, str]] = OrderedDict()  # (expiry, message)

    def check(self, url: str) -> None:
        """Raise the store's `ModelNotFound` again if it is recent."""
        entry = self._until.get(url)
        if entry is None:
            return
        expires, message = entry
        if self.clock() < expires:
            raise ModelNotFound(f"{message} (the store said so under {self.ttl_s:g} s ago)")
        del self._until[url]

    def remember(self, url: str, error: ModelNotFound) -> None:
        self._until.pop(url, None)
        self._until[url] = (self.clock() + self.ttl_s, str(error))
        if len(self._until) > self.max_urls:
            self._until.popitem(last=False)
