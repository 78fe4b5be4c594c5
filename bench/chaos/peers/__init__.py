"""The libraries the chaos driver can run: Wurk and its peers, by name."""

from __future__ import annotations

from chaos.peers.base import ALL_FAULTS, Peer
from chaos.peers.celery import CeleryPeer
from chaos.peers.dramatiq import DramatiqPeer
from chaos.peers.rq import RqPeer
from chaos.peers.sidekiq import SidekiqPeer
from chaos.peers.wurk import WurkPeer

PEERS: dict[str, type[Peer]] = {
    "wurk": WurkPeer,
    "rq": RqPeer,
    "dramatiq": DramatiqPeer,
    "celery": CeleryPeer,
    "sidekiq": SidekiqPeer,
}

__all__ = ["ALL_FAULTS", "PEERS", "Peer"]
