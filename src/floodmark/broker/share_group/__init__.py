"""KIP-932 share groups (queues): the share-partition core, the share-group coordinator core,
and the store that keeps a share partition's state across restarts."""
