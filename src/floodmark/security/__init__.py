"""Security: who is on a connection (principals), how they proved it (TLS, SASL), what they may
do (ACLs, the authorizer) and how fast (quotas). Pure rules where possible; the broker and the
controller apply them at the connection (authentication), at dispatch (authorization, one check
before any handler runs) and where the response is sent (quotas). See ``DESIGN.md`` §security.
"""
