"""The differential tester (issue 23 item 2): scripted scenarios sent, request by request, to real
Apache Kafka and to floodmark through the same client (``KafkaConnection`` with kio request
classes), and the answers compared field by field.

- ``session``: what a scenario talks through (one connection, names unique to the run, waits).
- ``scenarios``: the scenarios, in the order of the issue (topics, produce/fetch, offsets,
  configs, partitions, records, groups, transactions).
- ``normalise``: the one place that erases what legitimately differs (node ids, ports, cluster
  and topic ids, member and producer ids, throttle times, error message texts).
- ``compare``: the field-by-field difference of two normalised answers.
- ``known``: the allow-list of known differences, each with its reason.
- ``runner``: runs every scenario against both brokers; ``report``: the readable report.

``python -m tests.reference.differential [--report FILE] [--kafka BOOTSTRAP --floodmark
BOOTSTRAP]`` starts what it is not given (a Kafka node, a floodmark broker) and prints the report.
"""
