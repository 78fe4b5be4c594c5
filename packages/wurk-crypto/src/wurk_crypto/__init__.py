"""wurk-crypto: AES-256-GCM on a job's secret argument, with key rotation.

::

    import wurk
    import wurk_crypto

    wurk_crypto.enable(2, lambda version: KEYS[version])  # 32 raw bytes each

    class ChargeCard(wurk.Job, encrypt=True):
        def perform(self, account_id, card): ...   # ``card`` arrives decrypted

    ChargeCard.perform_async(42, {"number": "4111 1111 1111 1111"})

The last positional argument is stored as an envelope that only a process
holding the key reads. See docs/encryption.md (rotation, threat model).
"""

from importlib import metadata

from wurk_crypto.activation import disable, enable, enabled
from wurk_crypto.envelope import is_envelope
from wurk_crypto.errors import DecryptionError, EncryptionKeyError, EncryptionNotEnabledError
from wurk_crypto.middleware import DecryptServer, EncryptClient

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-crypto")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "DecryptServer",
    "DecryptionError",
    "EncryptClient",
    "EncryptionKeyError",
    "EncryptionNotEnabledError",
    "__version__",
    "disable",
    "enable",
    "enabled",
    "is_envelope",
]
