"""Which addresses web_fetch may reach: public unicast only, judged after resolution."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.agent.web.addresses import (
    AddressPolicy,
    AddressRefused,
    SystemResolver,
    parse_networks,
)

REFUSED = {
    "127.0.0.1": "loopback",
    "127.8.9.10": "loopback",
    "::1": "loopback",
    "0.0.0.0": "this network",
    "::": "unspecified",
    "10.1.2.3": "private",
    "172.20.0.5": "private",
    "192.168.1.1": "private",
    "fd12:3456::1": "unique local",
    "169.254.10.10": "link-local",
    "fe80::1": "link-local",
    "100.64.0.1": "carrier-grade NAT",
    "224.0.0.251": "multicast",
    "ff02::fb": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "broadcast",
    "192.0.2.10": "non-public",  # documentation range
    "198.18.0.1": "non-public",  # benchmarking range
    "2001:db8::1": "non-public",
    # Cloud metadata services, by every name
    "169.254.169.254": "metadata",
    "169.254.170.2": "metadata",
    "fd00:ec2::254": "metadata",
    "100.100.100.200": "metadata",
    # IPv6 forms that carry an IPv4 address are judged by it
    "::ffff:127.0.0.1": "loopback",
    "::ffff:169.254.169.254": "metadata",
    "64:ff9b::a00:1": "private",  # NAT64 of 10.0.0.1
    "2002:7f00:1::1": "loopback",  # 6to4 of 127.0.0.1
    "2001:0:4136:e378:8000:63bf:f5ff:fffe": "private",  # Teredo, client 10.0.0.1
}


# Red-team round 3: every IPv6 form that carries an IPv4 address, judged by that address.
# (address, the IPv4 address it carries, what it is)
EMBEDDED = [
    ("::7f00:1", "127.0.0.1", "loopback"),  # IPv4-compatible (deprecated)
    ("::a00:1", "10.0.0.1", "private"),
    ("::a9fe:a9fe", "169.254.169.254", "metadata"),
    ("::ffff:0:7f00:1", "127.0.0.1", "loopback"),  # IPv4-translated
    ("::ffff:0:c0a8:101", "192.168.1.1", "private"),
    ("::ffff:7f00:1", "127.0.0.1", "loopback"),  # IPv4-mapped
    ("64:ff9b::7f00:1", "127.0.0.1", "loopback"),  # NAT64, well-known prefix
    ("64:ff9b::a9fe:a9fe", "169.254.169.254", "metadata"),
    ("64:ff9b:1::7f00:1", "127.0.0.1", "loopback"),  # NAT64 local-use, /96 layout
    ("64:ff9b:1:7f00:1::", "127.0.0.1", "loopback"),  # local-use, /64 layout
    ("64:ff9b:1:a:0:100::", "0.10.0.1", "this network"),  # /48 and /56 layouts
    ("64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254", "metadata"),  # /48 layout
    ("64:ff9b:1:0:a9:fea9:fe00:0", "169.254.169.254", "metadata"),  # /64 layout
    ("2002:a00:1::1", "10.0.0.1", "private"),  # 6to4
    ("2001:0:7f00:1:8000:63bf:5db8:d822", "127.0.0.1 (server)", "loopback"),  # Teredo
    ("2606:4700::5efe:7f00:1", "127.0.0.1", "loopback"),  # ISATAP interface id
    ("2606:4700::200:5efe:a00:1", "10.0.0.1", "private"),
]
PUBLIC_EMBEDDED = [
    "::5db8:d822",
    "::ffff:0:5db8:d822",
    "64:ff9b::5db8:d822",
    "64:ff9b:1::5db8:d822",
    "2002:5db8:d822::1",
    "2606:4700::200:5efe:5db8:d822",
]  # 93.184.216.34 in each form


@pytest.mark.parametrize(("address", "carried", "kind"), EMBEDDED)
def test_every_embedded_ipv4_form_is_judged_by_its_ipv4_address(
    address: str, carried: str, kind: str
) -> None:
    why = AddressPolicy().refusal(ipaddress.ip_address(address))
    assert why is not None and kind in why, (address, carried, why)


@pytest.mark.parametrize("address", PUBLIC_EMBEDDED)
def test_an_embedded_public_ipv4_address_passes(address: str) -> None:
    assert AddressPolicy().refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("address", "kind"), sorted(REFUSED.items()))
def test_non_public_addresses_are_refused_with_their_kind(address: str, kind: str) -> None:
    why = AddressPolicy().refusal(ipaddress.ip_address(address))
    assert why is not None and kind in why


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34"]
)
def test_public_addresses_pass(address: str) -> None:
    assert AddressPolicy().refusal(ipaddress.ip_address(address)) is None


def test_allow_networks_opens_exactly_what_it_names_but_never_metadata() -> None:
    policy = AddressPolicy(parse_networks(["127.0.0.1", "169.254.0.0/16"]))
    assert policy.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert "loopback" in (policy.refusal(ipaddress.ip_address("127.0.0.2")) or "")
    assert policy.refusal(ipaddress.ip_address("169.254.1.1")) is None
    assert "metadata" in (policy.refusal(ipaddress.ip_address("169.254.169.254")) or "")


def test_one_bad_address_refuses_the_whole_host() -> None:
    """A name answering with a public and a private address is a rebinding setup."""
    with pytest.raises(AddressRefused, match=r"mixed\.test \(10\.0\.0\.7\) is a private"):
        AddressPolicy().check("mixed.test", ["93.184.216.34", "10.0.0.7"])
    with pytest.raises(AddressRefused, match="no address"):
        AddressPolicy().check("empty.test", [])


async def test_the_system_resolver_answers_localhost_and_the_policy_refuses_it() -> None:
    """`localhost` comes from the hosts file: no network is used."""
    addresses = await SystemResolver().resolve("localhost", 80)
    assert addresses
    with pytest.raises(AddressRefused, match="loopback"):
        AddressPolicy().check("localhost", addresses)
