"""How memstream's Kafka clients authenticate: TLS and SASL, from settings, for aiokafka and Faust.

Every client memstream opens (the Faust worker, the topic admin, publishers, the replay's
copier, the query API's producer) takes the same options, so a secured cluster needs the
settings once. Plaintext stays the default: the embedded broker and a private network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a context is made: Settings.validate (every hook and command) needs no ssl
    import ssl

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def problems(protocol: str, mechanism: str, username: str, password: str) -> list[str]:
    """What is wrong with a combination of Kafka security settings (empty: nothing)."""
    found = []
    if protocol not in PROTOCOLS:
        found.append(f"security protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if protocol.startswith("SASL"):
        if mechanism not in MECHANISMS:
            found.append(f"SASL mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        if not username or not password:
            found.append("SASL needs a username and a password")
    return found


def ssl_context(cafile: str) -> ssl.SSLContext:
    """Verifying TLS: the system's CAs, or the given CA bundle (a private cluster's CA)."""
    import ssl

    return ssl.create_default_context(cafile=cafile or None)


def client_options(settings: Any) -> dict[str, Any]:
    """Keyword arguments for an aiokafka producer, consumer or admin client."""
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return {}
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol.endswith("SSL"):
        options["ssl_context"] = ssl_context(settings.kafka_ssl_cafile)
    if protocol.startswith("SASL"):
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        options["sasl_plain_password"] = settings.kafka_sasl_password
    return options


def faust_credentials(settings: Any) -> Any:
    """Faust's ``broker_credentials`` for the same settings (None: plaintext)."""
    import faust
    from faust.types.auth import SASLMechanism

    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = ssl_context(settings.kafka_ssl_cafile) if protocol.endswith("SSL") else None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username,
        password=settings.kafka_sasl_password,
        mechanism=SASLMechanism(settings.kafka_sasl_mechanism),
        ssl_context=context,
    )
