"""The protocols' meaning, one floor below both transports (HTTP and gRPC).

- `oip`           the host's models as the Open Inference Protocol sees them
- `torchserve`    TorchServe's management calls on the host's models
- `registration`  TorchServe's registration parameters, applied or refused
- `params`        caps on headers and query parameters
- `pages`         page sizes and the cursors between pages
- `bodies`        request bodies and answers within their size limits
- `status`        the one table from core exceptions to statuses
- `health`        whether the server takes requests
- `access`        which callers may manage models without a token
- `tenants`       who a request's tenant is
"""
