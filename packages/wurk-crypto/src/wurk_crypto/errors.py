"""What can go wrong with an encrypted argument, and where it surfaces."""

from __future__ import annotations

from wurk.errors import ConfigurationError


class EncryptionKeyError(ConfigurationError):
    """No usable key for a version at push time (the resolver returned
    nothing, raised ``KeyError``/``IndexError``, or gave a key that is not 32
    bytes): raised out of ``perform_async``, and nothing is enqueued."""


class EncryptionNotEnabledError(ConfigurationError):
    """A job asks for ``encrypt`` in a process that never called
    ``wurk_crypto.enable``: refused rather than pushed in clear text, or run
    with its ciphertext as an argument."""


class DecryptionError(Exception):
    """An encrypted argument cannot be decrypted in the worker: its key
    version is unknown there, the ciphertext or tag was altered, or the
    envelope is malformed. Retrying would fail the same way, so the job goes
    straight to the dead set, arguments untouched."""


__all__ = ["DecryptionError", "EncryptionKeyError", "EncryptionNotEnabledError"]
