"""Security: who is on a connection (principals), how they proved it (TLS, SASL), what they may
do (ACLs, the authorizer) and how fast (quotas). Pure rules where possible; the broker and the
controller apply them at the connection (authentication), at dispatch (authorization, one check
before any handler runs) and where the response is sent (quotas). See ``DESIGN.md`` §security.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.security import certs
    from floodmark.security.acl import (
        CLUSTER_NAME,
        SUPPORTED_OPERATIONS,
        WILDCARD,
        AclBinding,
        AclBindingFilter,
        AclError,
        AclOperation,
        AclPermissionType,
        AclStore,
        PatternType,
        ResourceType,
        new_binding,
        new_filter,
    )
    from floodmark.security.authorizer import (
        AUTHORIZED_OPERATIONS_OMITTED,
        Authorizer,
        AuthorizerSettings,
        authorizer_settings,
    )
    from floodmark.security.channel import PLAINTEXT_CHANNEL, ChannelSecurity
    from floodmark.security.client_security import PLAINTEXT, ClientSecurity, read_properties
    from floodmark.security.delegation_token import SECRET_SETTING, TokenCredentials
    from floodmark.security.inter_broker import INTER_BROKER_MECHANISM, jaas_setting
    from floodmark.security.jaas import SCRAM_LOGIN_MODULE
    from floodmark.security.listeners import (
        Endpoint,
        ListenerConfig,
        SecurityProtocol,
        listener_config,
    )
    from floodmark.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal, parse_principal
    from floodmark.security.quotas import (
        CLIENT_ID,
        QUOTA_KEYS,
        USER,
        MatchType,
        QuotaChanges,
        QuotaEntity,
        QuotaError,
        QuotaStore,
        QuotaType,
        SampledRate,
        TokenBucket,
        new_alteration,
        new_entity,
        new_quota_filter,
        record_and_throttle,
        validate_quota,
    )
    from floodmark.security.sasl.exchange import MechanismServer
    from floodmark.security.sasl.jwks_source import KeySet
    from floodmark.security.sasl.oauthbearer import OAUTHBEARER, OAuthBearerServer, OAuthSettings
    from floodmark.security.sasl.plain import PLAIN, PlainServer, PlainUsers
    from floodmark.security.sasl.scram import (
        DEFAULT_ITERATIONS,
        MAX_ITERATIONS,
        MIN_ITERATIONS,
        ScramCredential,
        ScramMechanism,
        ScramServer,
        ScramUser,
        check_iterations,
        check_user_name,
        credential_from_salted_password,
        new_salt,
        parse_add_scram,
        salted_password,
    )
    from floodmark.security.sasl.session import SaslSession, SaslSettings, Verdict
    from floodmark.security.sasl.settings import (
        JWKS_URL_SETTING,
        listener_sasl_settings,
        oauth_settings,
        plain_users,
    )
    from floodmark.security.tls import ServerTls, TlsRefused, ssl_settings
    from floodmark.security.tls_server import ThreadedTlsServer, TlsServer

__all__ = [
    "ANONYMOUS",
    "AUTHORIZED_OPERATIONS_OMITTED",
    "CLIENT_ID",
    "CLUSTER_NAME",
    "DEFAULT_ITERATIONS",
    "INTER_BROKER_MECHANISM",
    "JWKS_URL_SETTING",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "OAUTHBEARER",
    "PLAIN",
    "PLAINTEXT",
    "PLAINTEXT_CHANNEL",
    "QUOTA_KEYS",
    "SCRAM_LOGIN_MODULE",
    "SECRET_SETTING",
    "SUPPORTED_OPERATIONS",
    "USER",
    "USER_TYPE",
    "WILDCARD",
    "AclBinding",
    "AclBindingFilter",
    "AclError",
    "AclOperation",
    "AclPermissionType",
    "AclStore",
    "Authorizer",
    "AuthorizerSettings",
    "ChannelSecurity",
    "ClientSecurity",
    "Endpoint",
    "KafkaPrincipal",
    "KeySet",
    "ListenerConfig",
    "MatchType",
    "MechanismServer",
    "OAuthBearerServer",
    "OAuthSettings",
    "PatternType",
    "PlainServer",
    "PlainUsers",
    "QuotaChanges",
    "QuotaEntity",
    "QuotaError",
    "QuotaStore",
    "QuotaType",
    "ResourceType",
    "SampledRate",
    "SaslSession",
    "SaslSettings",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "ScramUser",
    "SecurityProtocol",
    "ServerTls",
    "ThreadedTlsServer",
    "TlsRefused",
    "TlsServer",
    "TokenBucket",
    "TokenCredentials",
    "Verdict",
    "authorizer_settings",
    "certs",
    "check_iterations",
    "check_user_name",
    "credential_from_salted_password",
    "jaas_setting",
    "listener_config",
    "listener_sasl_settings",
    "new_alteration",
    "new_binding",
    "new_entity",
    "new_filter",
    "new_quota_filter",
    "new_salt",
    "oauth_settings",
    "parse_add_scram",
    "parse_principal",
    "plain_users",
    "read_properties",
    "record_and_throttle",
    "salted_password",
    "ssl_settings",
    "validate_quota",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
