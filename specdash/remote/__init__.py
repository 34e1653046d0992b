"""Reaching a host: the `Host` interface and its asyncssh implementation.

asyncssh names cryptography's DSA classes in its type hints at import time, and cryptography 51 deprecates
DSA with a warning on every such access: five lines of `CryptographyDeprecationWarning` on every command
(issue 29 point 10). specdash never makes or offers DSA keys, so exactly that warning, raised from asyncssh's
modules, is ignored; every other warning still shows. This package is the only importer of asyncssh (its
modules take it from `specdash.remote.sshlib`, which also keeps asyncssh's import from running a compiler), and
its `__init__` runs before any of its modules import it.
"""

import warnings

# CryptographyDeprecationWarning is a UserWarning; naming its base keeps this import free of cryptography.
warnings.filterwarnings("ignore", message="DSA is deprecated", category=UserWarning, module=r"asyncssh(\.|$)")
