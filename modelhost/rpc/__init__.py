"""gRPC: the Open Inference Protocol's GRPCInferenceService and TorchServe's inference and
management services, entering the same host as HTTP.

- `messages`    the protocol's message classes, from our .proto files, in a pool of their own
- `stubs`       servicers to handlers, and client stubs, from the services' descriptors
- `status`      the one table from core exceptions to gRPC status codes
- `tensors`     ModelInferRequest to the OIP body the worker decodes, and the reply back
- `oip`         the GRPCInferenceService servicer
- `torchserve`  TorchServe's InferenceAPIsService and ManagementAPIsService servicers
- `server`      the grpc.aio servers, their ports, TLS and health service
"""
