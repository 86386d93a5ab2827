"""KIP-848's consumer group protocol: assignors, Kafka's consumer-group records, and the
sans-I/O coordinator core (``core``) that the broker's handlers drive."""
