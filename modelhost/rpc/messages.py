"""The protocols' message classes, built from the descriptor set of modelhost/rpc/protos.

A pool of their own: tritonclient registers the same names in protobuf's default one.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import ServiceDescriptor

DESCRIPTOR_SET = "descriptors.binpb"
OIP_SERVICE = "inference.GRPCInferenceService"
TS_INFERENCE_SERVICE = "org.pytorch.serve.grpc.inference.InferenceAPIsService"
TS_MANAGEMENT_SERVICE = "org.pytorch.serve.grpc.management.ManagementAPIsService"


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    data = resources.files("modelhost.rpc").joinpath("protos", DESCRIPTOR_SET).read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data)
    loaded = descriptor_pool.DescriptorPool()
    for file in files.file:  # protoc writes each file after those it imports
        loaded.Add(file)
    return loaded


@functools.cache
def message(full_name: str) -> Any:
    return message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))


def service(full_name: str) -> ServiceDescriptor:
    return pool().FindServiceByName(full_name)
