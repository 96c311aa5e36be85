"""What reading a call's frames costs the gRPC guard, without sockets: CPU a call for the
client's side (HEADERS with the call's indexed header block, then its DATA) and the server's
(HEADERS, DATA, trailers), as h2load's calls on one connection send them.

    python benchmarks/grpc_guard_frames.py
    python benchmarks/grpc_guard_frames.py --checkout /tmp/at-HEAD   # a `git archive` of a commit
"""

from __future__ import annotations

import argparse
import importlib
import time

import hpack
from _common import add_checkout, use_checkout
from hyperframe.frame import DataFrame, HeadersFrame

CALLS = 20_000
MESSAGE = bytes((0, 0, 0, 0, 120)) + bytes(120)  # an iris ModelInfer's size
FIELDS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"),
    (":authority", "127.0.0.1:8001"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


def frame(frame: HeadersFrame | DataFrame, *flags: str) -> bytes:
    for flag in flags:
        frame.flags.add(flag)
    return bytes(frame.serialize())


def calls() -> tuple[list[bytes], list[bytes]]:
    """Each call's bytes from the client, and from the server."""
    client, server = hpack.Encoder(), hpack.Encoder()
    sent, answered = [], []
    for stream_id in range(1, 2 * CALLS, 2):
        sent.append(
            frame(HeadersFrame(stream_id, data=client.encode(FIELDS)), "END_HEADERS")
            + frame(DataFrame(stream_id, data=MESSAGE), "END_STREAM")
        )
        status = server.encode([(":status", "200"), ("content-type", "application/grpc")])
        trailers = server.encode([("grpc-status", "0")])
        answered.append(
            frame(HeadersFrame(stream_id, data=status), "END_HEADERS")
            + frame(DataFrame(stream_id, data=bytes(5) + b"x" * 64))
            + frame(HeadersFrame(stream_id, data=trailers), "END_HEADERS", "END_STREAM")
        )
    return sent, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout(parser)
    use_checkout(parser.parse_args())
    read = importlib.import_module("modelhost.rpc.frames")  # the checkout's, if given
    sent, answered = calls()
    frames = read.ClientFrames(read.Limits(128, 16384, 10, 256))
    frames.feed(read.PREFACE)
    server_frames = read.FrameReader(lambda head: False)
    start_s = time.process_time()
    for data in sent:
        frames.feed(data)
    client_s = time.process_time() - start_s
    for data in answered:  # as Relay.from_backend reads them
        for head, _, _ in server_frames.feed(data):
            if head.kind == read.RST_STREAM or (head.kind == read.HEADERS and head.flags & 1):
                frames.ended(head.stream_id)
    server_s = time.process_time() - start_s - client_s
    client_us, server_us = 1e6 * client_s / CALLS, 1e6 * server_s / CALLS
    print(f"client's frames {client_us:.1f} µs a call, server's {server_us:.1f} µs")


if __name__ == "__main__":
    main()
