"""The plan's `secure` section of a `--secure` run (launcher/config/keys.py writes it,
dfl_node/transports/encryption.py reads it); a plan whose sockets are not CURVE-secured holds
none (written {}).

The public keys are the plan's; `keys_dir` says where this host keeps the key files, so it is
host-local and in no section hash. Whether each key is a valid Z85 key is encryption.py's check,
which knows the key format.
"""

from __future__ import annotations

from dfl_config.section import Section


class SecureSection(Section):
    keys_dir: str
    """This host's directory of the run's key files (`dfl-node --keys` may name another)."""
    public_keys: dict[str, str]
    """Key name (`node-<id>`, `aggregator`, `collector`, `coordinator`) -> Z85 public key."""
