"""The client side: making a job and putting it into Redis.

The job classes and decorator, the payload and its fields, the push
middleware chain, the writers that reach Redis, the class-name registry, the
outage buffer and the transaction-aware push. A web process that only enqueues
imports this and what lies below it, never :mod:`wurk.server`.
"""
