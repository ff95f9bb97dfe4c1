"""Pod IPs on this machine: every address in 127.0.0.0/8, and servers with engine stand-ins
(which listen on pod IPs) never hand out each other's addresses."""

from __future__ import annotations

import ipaddress
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.engine_pods import PODS, sglang_pod
from apiserver.helpers import Client, small_cluster
from support.fuzz import examples
from tandem.apiserver import pod_network
from tandem.apiserver.server import ApiServer


@settings(max_examples=examples(100))
@given(st.integers(10, 254).filter(lambda b: b != pod_network.HOST_BLOCK), st.integers(1, 254 * 255 - 1))
def test_every_pod_address_is_loopback_in_its_block_and_never_the_reservation(block, n):
    ip = ipaddress.ip_address(pod_network.address(block, n))
    assert ip.is_loopback and ip in ipaddress.ip_network(f"127.{block}.0.0/16")
    assert str(ip) != f"127.{block}.255.254"
    assert pod_network.address(block, n) != pod_network.address(block, n + 1)


def test_two_reservations_take_two_blocks_and_a_held_block_is_never_handed_out():
    first = pod_network.reserve()
    try:
        second = pod_network.reserve()
        try:
            assert second.block != first.block and pod_network.HOST_BLOCK not in (first.block, second.block)
        finally:
            second.release()
        again = pod_network.reserve()
        assert again.block != first.block, "a released block is free again; a held one is never handed out"
        again.release()
    finally:
        first.release()


def test_two_servers_with_engines_hand_out_different_pod_ips():
    with ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=0.001) as one, \
         ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=0.001) as two:
        ips = []
        for server in (one, two):
            client = Client(server.url)
            client.post(PODS, sglang_pod("d", "decode"))
            ips.append(_wait_ip(client))
        assert ips[0] != ips[1] and all(ipaddress.ip_address(ip).is_loopback for ip in ips)
        assert ips[0].split(".")[1] != ips[1].split(".")[1], "each its own 127.X.0.0/16"


def _wait_ip(client: Client) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ip = (client.get(f"{PODS}/d").body.get("status") or {}).get("podIP")
        if ip:
            return str(ip)
        time.sleep(0.02)
    raise AssertionError("the pod got no IP")
