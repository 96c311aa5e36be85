"""gRPC: the Open Inference Protocol's and TorchServe's services, on the same host as HTTP."""
