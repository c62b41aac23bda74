"""The few rtnetlink questions the network guard asks the kernel, asked directly: a box's
network sync asked them of `ip` (two program starts, 5-10 ms, on every box's claim and
create). Only what is read here is parsed; the kernel's answers are trusted (they are
the host namespace's own links and addresses, which no box can add to)."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
from dataclasses import dataclass

# linux/netlink.h, linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_NLM_F_DUMP_INTR = 0x10  # set on a dump's messages when it was interrupted
_RTM_NEWLINK = 16
_RTM_GETLINK = 18
_RTM_NEWADDR = 20
_RTM_GETADDR = 22
_RTM_GETNSID = 90
_NETNSA_NSID = 1
_NETNSA_PID = 2
_IFLA_IFNAME = 3
_IFLA_LINK = 5
_IFLA_MASTER = 10
_IFLA_LINKINFO = 18
_IFLA_LINK_NETNSID = 37
_IFLA_EXT_MASK = 29
_IFLA_TARGET_NETNSID = 46
_RTEXT_FILTER_SKIP_STATS = 1 << 3
_IFLA_INFO_SLAVE_DATA = 5
_IFLA_BRPORT_ISOLATED = 33
_LINK_ATTRS = frozenset((_IFLA_IFNAME, _IFLA_MASTER, _IFLA_LINKINFO, _IFLA_LINK_NETNSID))
_PEER = frozenset((_IFLA_LINK,))
# How many of a box's own links are read for where its port is: a box may make any
# number, and they are only a hint (what it names is checked on the host's side).
PEER_LINKS = 16
_SLAVE = frozenset((_IFLA_INFO_SLAVE_DATA,))
_ISOLATED = frozenset((_IFLA_BRPORT_ISOLATED,))
_IFA_ADDRESS = 1
_IFA_LOCAL = 2
_NLA_TYPE_MASK = 0x3FFF  # without the nested / byte-order flags
# A dump's datagrams are at most 32 KiB (the kernel's own cap), whatever their count.
_RECV = 1 << 16
_DUMP_TRIES = 3
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_IFINFO = struct.Struct("=BxHiII")  # ifinfomsg
_IFADDR = struct.Struct("=BBBBI")  # ifaddrmsg
_ATTR = struct.Struct("=HH")  # nlattr


class NetlinkError(OSError):
    pass


@dataclass(frozen=True)
class Link:
    name: str
    netnsid: int | None  # the far end's namespace (a veth's), in this namespace's numbering
    isolated: bool  # a bridge port's isolation flag


def attributes(
    data: bytes | memoryview, offset: int, end: int, only: frozenset[int] | None = None
) -> dict[int, memoryview]:
    """A message's attributes from `offset` to `end`, by type (the last of each wins);
    with `only`, just those types (a link carries some forty: 500 ports' worth, kept
    whole, was most of a network sync's time)."""
    view = memoryview(data)
    unpack = _ATTR.unpack_from
    found: dict[int, memoryview] = {}
    while offset + _ATTR.size <= end:
        size, kind = unpack(view, offset)
        if size < _ATTR.size or offset + size > end:
            break
        kind &= _NLA_TYPE_MASK
        if only is None or kind in only:
            found[kind] = view[offset + _ATTR.size : offset + size]
        offset += (size + 3) & ~3
    return found


def _messages(request: bytes) -> list[tuple[int, memoryview]]:
    """Each (type, body) of the kernel's whole answer to a dump request. A dump the kernel
    marks interrupted (links came or went while it was being made: one may be missing) is
    asked again; an answer that is not whole raises NetlinkError."""
    for _ in range(_DUMP_TRIES):
        answer, interrupted = _dump(request)
        if not interrupted:
            return answer
    raise NetlinkError(errno.EAGAIN, "the kernel's answer kept changing while it was read")


def _dump(request: bytes, limit: int | None = None) -> tuple[list[tuple[int, memoryview]], bool]:
    """The answer's messages, up to `limit` of them (the rest is never read)."""
    answer: list[tuple[int, memoryview]] = []
    interrupted = False
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as nl:
        nl.settimeout(2)
        nl.send(request)
        while limit is None or len(answer) < limit:
            data = memoryview(nl.recv(_RECV))
            offset = 0
            while offset < len(data):
                if offset + _HEADER.size > len(data):
                    raise NetlinkError(errno.EPROTO, "a netlink message cut short")
                length, kind, flags, _, _ = _HEADER.unpack_from(data, offset)
                if length < _HEADER.size or offset + length > len(data):
                    raise NetlinkError(errno.EPROTO, "a netlink message of a wrong length")
                body = data[offset + _HEADER.size : offset + length]
                interrupted = interrupted or bool(flags & _NLM_F_DUMP_INTR)
                if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                    (code,) = struct.unpack_from("=i", body) if len(body) >= 4 else (0,)
                    if code:
                        raise NetlinkError(-code, os.strerror(-code))
                    return answer, interrupted
                answer.append((kind, body))
                offset += (length + 3) & ~3
    return answer, interrupted


def _request(kind: int, body: bytes, flags: int = _NLM_F_DUMP) -> bytes:
    return _HEADER.pack(_HEADER.size + len(body), kind, _NLM_F_REQUEST | flags, 1, 0) + body


def _attr(kind: int, value: bytes) -> bytes:
    size = _ATTR.size + len(value)
    return _ATTR.pack(size, kind) + value + b"\0" * (-size % 4)


def ports_of(master: int) -> list[Link]:
    """The links enslaved to link `master` (a bridge's ports). Dumping them also makes the
    kernel number the namespaces their far ends are in."""
    body = _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
    body += _attr(_IFLA_MASTER, struct.pack("=I", master))
    # Without each link's counters (a fifth of the answer); a kernel older than the flag
    # ignores it.
    body += _attr(_IFLA_EXT_MASK, struct.pack("=I", _RTEXT_FILTER_SKIP_STATS))
    links = []
    for kind, msg in _messages(_request(_RTM_GETLINK, body)):
        # A kernel that ignored the filter answers with every link.
        if kind == _RTM_NEWLINK and (link := _port(msg, master)) is not None:
            links.append(link)
    return links


def port_into(master: int, nsid: int) -> Link | None:
    """The port of bridge `master` whose far end is in namespace `nsid` (this namespace's
    number for it), found without listing every port: the namespace's own links name
    their peers' indexes, and each named is asked for here, and taken only if it is a
    port of `master` leading to `nsid` (what a box's links say is a hint, never trusted).
    None where no link there names such a port, or the kernel cannot say."""
    body = _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
    body += _attr(_IFLA_TARGET_NETNSID, struct.pack("=i", nsid))
    body += _attr(_IFLA_EXT_MASK, struct.pack("=I", _RTEXT_FILTER_SKIP_STATS))
    try:
        theirs, _ = _dump(_request(_RTM_GETLINK, body), limit=PEER_LINKS)
    except OSError:
        return None  # a kernel without target namespaces in dumps, or the namespace gone
    named = []
    for kind, msg in theirs:
        if kind != _RTM_NEWLINK or len(msg) < _IFINFO.size:
            continue
        peer = attributes(msg, _IFINFO.size, len(msg), _PEER).get(_IFLA_LINK)
        if peer is not None and len(peer) >= 4 and (index := struct.unpack_from("=i", peer)[0]) > 0:
            named.append(index)
    found = [
        link
        for index in dict.fromkeys(named)
        if (link := _link_at(index, master)) is not None and link.netnsid == nsid
    ]
    return found[0] if len(found) == 1 else None


def _link_at(index: int, master: int) -> Link | None:
    """Link `index` of this namespace if it is a port of `master`."""
    body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, 0, 0)
    body += _attr(_IFLA_EXT_MASK, struct.pack("=I", _RTEXT_FILTER_SKIP_STATS))
    try:
        answer, _ = _dump(_request(_RTM_GETLINK, body, flags=0), limit=1)
    except OSError:
        return None  # no such link (ENODEV): gone, or never one
    for kind, msg in answer:
        if kind == _RTM_NEWLINK:
            return _port(msg, master, index)
    return None


def _port(msg: memoryview, master: int, index: int | None = None) -> Link | None:
    """A link's message as a port of `master` (None if it is not one, or is not link
    `index`)."""
    if len(msg) < _IFINFO.size:
        return None
    if index is not None and _IFINFO.unpack_from(msg)[2] != index:
        return None
    attrs = attributes(msg, _IFINFO.size, len(msg), _LINK_ATTRS)
    up = attrs.get(_IFLA_MASTER)
    if _IFLA_IFNAME not in attrs or up is None or len(up) < 4:
        return None
    if struct.unpack_from("=I", up)[0] != master:
        return None
    nsid = attrs.get(_IFLA_LINK_NETNSID)
    if nsid is not None and len(nsid) < 4:
        nsid = None
    isolated = False
    if (info := attrs.get(_IFLA_LINKINFO)) is not None:
        slave = attributes(info, 0, len(info), _SLAVE).get(_IFLA_INFO_SLAVE_DATA)
        if slave is not None:
            flag = attributes(slave, 0, len(slave), _ISOLATED).get(_IFLA_BRPORT_ISOLATED)
            isolated = flag is not None and len(flag) > 0 and bool(flag[0])
    # A link's name may be any bytes but '/' and NUL: kept as the kernel gave it, so
    # that it still names the link's sysfs folder.
    name = bytes(attrs[_IFLA_IFNAME]).split(b"\0", 1)[0].decode(errors="surrogateescape")
    return Link(name, struct.unpack_from("=i", nsid)[0] if nsid is not None else None, isolated)


def ipv4_networks(skip: int | None = None) -> list[str]:
    """Every IPv4 address of this namespace as `address/prefix`, but those of link `skip`."""
    body = _IFADDR.pack(socket.AF_INET, 0, 0, 0, 0)
    found = []
    for kind, msg in _messages(_request(_RTM_GETADDR, body)):
        if kind != _RTM_NEWADDR or len(msg) < _IFADDR.size:
            continue
        family, prefix, _, _, index = _IFADDR.unpack_from(msg)
        if family != socket.AF_INET or index == skip:
            continue
        attrs = attributes(msg, _IFADDR.size, len(msg))
        addr = attrs.get(_IFA_LOCAL, attrs.get(_IFA_ADDRESS))
        if addr is not None and len(addr) == 4:
            found.append(f"{ipaddress.IPv4Address(bytes(addr))}/{prefix}")
    return found


class NamespaceIds:
    """Asks the kernel which id this namespace gives the network namespace of a process,
    for one sync's boxes over one socket (a socket each was most of the asking: 500 boxes,
    3.4 ms against 0.9). Each answer is matched to its question by sequence number, so one
    that came too late for its own question is never taken for the next's."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.settimeout(2)
        self._seq = 0

    def __enter__(self) -> NamespaceIds:
        return self

    def __exit__(self, *_: object) -> None:
        self._sock.close()

    def of(self, pid: int) -> int | None:
        """The id of process `pid`'s network namespace (None if it has none, or the
        process is gone: a box whose init just exited is then one port left unbound, not
        a failed sync for every box). Raises OSError when the kernel does not answer."""
        self._seq += 1
        body = struct.pack("=B3x", socket.AF_UNSPEC) + _attr(_NETNSA_PID, struct.pack("=I", pid))
        size = _HEADER.size + len(body)
        self._sock.send(_HEADER.pack(size, _RTM_GETNSID, _NLM_F_REQUEST, self._seq, 0) + body)
        while True:
            data = self._sock.recv(4096)
            if len(data) < _HEADER.size + 4:
                return None
            length, kind, _, seq, _ = _HEADER.unpack_from(data)
            if seq == self._seq:
                break
        if kind == _NLMSG_ERROR:
            return None
        # Its attributes follow the header and rtgenmsg (4 bytes).
        found = attributes(data, _HEADER.size + 4, min(length, len(data))).get(_NETNSA_NSID)
        if found is None or len(found) < 4:
            return None
        (nsid,) = struct.unpack_from("=i", found)
        return int(nsid) if nsid >= 0 else None
