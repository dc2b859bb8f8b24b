"""Test double (loaded through $AUDIT_PLUGINS): a plugin module that calls sys.exit(3) when
imported, as a broken plugin might."""

import sys

sys.exit(3)
