"""Which hosts a boxed kernel may reach through the egress proxy (`sandbox_network` as a list).

An entry is a host name (`pypi.org`), an IP address (`10.0.0.5`, `[::1]`), or a domain's
subdomains (`*.githubusercontent.com`: not the domain itself), each with an optional
`:port`. Names match exactly, case-insensitively; without a port an entry allows 80 and
443 only. The proxy resolves names itself and connects only to public addresses, unless
the address itself is listed: a listed name that resolves to 127.0.0.1, 10.x or
169.254.169.254 (a cloud's metadata service) is refused, so a name cannot be pointed at the
host or its private network after the fact (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: What an entry without a port allows: plain HTTP and HTTPS.
DEFAULT_PORTS = (80, 443)
#: Where a refusal points to.
SETTING = "c.JupyterCI.sandbox_network"
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")


@dataclass(frozen=True)
class Rule:
    """One allowlist entry: a host (or, wildcard, the suffix of its subdomains) and a port."""

    host: str
    port: int | None = None
    wildcard: bool = False
    #: Reach whatever the name resolves to (the broker's own URL, which the server chose).
    any_address: bool = False

    def entry(self) -> str:
        """Return this rule as the setting's entry that makes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        host = f"*.{host}" if self.wildcard else host
        return host if self.port is None else f"{host}:{self.port}"

    def matches(self, host: str, port: int) -> bool:
        """Tell whether this entry allows `host` (normalised) on `port`."""
        if port != self.port and (self.port is not None or port not in DEFAULT_PORTS):
            return False
        return host.endswith(f".{self.host}") if self.wildcard else host == self.host


@dataclass(frozen=True)
class Allowlist:
    """The entries of `sandbox_network`, parsed."""

    rules: tuple[Rule, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        """Parse the setting's entries; raise ValueError naming a malformed one."""
        return cls(tuple(dict.fromkeys(parse_rule(entry) for entry in entries)))

    def with_rule(self, rule: Rule) -> Allowlist:
        """Return this allowlist with one more entry."""
        return Allowlist(tuple(dict.fromkeys([*self.rules, rule])))

    def rule_for(self, host: str, port: int) -> Rule | None:
        """Return the entry that allows `host:port` (host normalised), or None."""
        return next((rule for rule in self.rules if rule.matches(host, port)), None)

    def reachable(self, rule: Rule, address: str) -> bool:
        """Tell whether the proxy may connect to `address` for a request `rule` allowed."""
        ip = ipaddress.ip_address(address.partition("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_global and not ip.is_multicast:
            return True
        # Loopback, link-local, private, reserved: only an address listed as itself.
        return rule.any_address or any(
            not listed.wildcard and listed.host == str(ip) for listed in self.rules)


def parse_rule(entry: str) -> Rule:
    """Parse one entry: `host`, `host:port`, `*.domain[:port]`, `[v6]:port` or a bare v6."""
    text = entry.strip()
    wildcard = text.startswith("*.")
    found = split_authority(text[2:] if wildcard else text)
    if found is None or (wildcard and _is_ip(found[0])):
        raise ValueError(f"{SETTING}: {entry!r} is not a host name, IP address, *.domain or "
                         "host:port")
    host, port = found
    return Rule(host, port, wildcard)


def split_authority(text: str) -> tuple[str, int | None] | None:
    """Split `host[:port]` (IPv6 in brackets) into a normalised host and port; None if bad."""
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        host, port_text = inside, rest[1:] if rest else None
        if not isinstance(_ip(host), ipaddress.IPv6Address):
            return None
    elif text.count(":") > 1:
        host, port_text = text, None  # a bare IPv6 address
    else:
        host, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    name = normal_host(host)
    port = _port(port_text) if port_text is not None else None
    if name is None or (port_text is not None and port is None):
        return None
    return name, port


def normal_host(host: str) -> str | None:
    """Return `host` lower-cased (IDNA for non-ASCII, IPs in canonical form), None if bad."""
    ip = _ip(host)
    if ip is not None:
        return str(ip)
    try:
        name = host.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return name


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _is_ip(host: str) -> bool:
    return _ip(host) is not None


def _port(text: str) -> int | None:
    if not text.isascii() or not text.isdigit() or len(text) > 5:
        return None
    port = int(text)
    return port if 0 < port < 65536 else None
