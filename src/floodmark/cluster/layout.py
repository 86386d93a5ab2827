"""Where a local cluster keeps itself: the directory ``floodmark cluster up`` uses by default,
the state file it writes there and a secured cluster's client settings file. A module of its own
so the client commands, which look for a local cluster's address, do not load the supervisor
(``cluster.local``) to learn these names."""

STATE_FILE = "cluster.json"
DEFAULT_DATA_DIR = "floodmark-cluster"
CLIENT_PROPERTIES = "client.properties"
"""A secured cluster's client settings (librdkafka's names), for ``--command-config``."""
