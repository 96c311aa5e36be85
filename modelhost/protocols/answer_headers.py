"""The headers modelhost adds to an answer (over gRPC, its trailers), lower-case."""

CACHE = "x-modelhost-cache"
TIER = "x-modelhost-tier"
TIMING = "server-timing"
INSTANCE = "x-modelhost-instance"
TENANT = "x-modelhost-tenant"  # the tenant the request was counted to
