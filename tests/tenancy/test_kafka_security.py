"""TLS and SASL to Kafka: the same settings give every aiokafka client and the Faust worker their options."""

from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest

from memstream.kafka.security import client_options, faust_credentials
from memstream.settings import Settings, SettingsError


def settings(**env: str) -> Settings:
    return Settings.from_env({f"MEMSTREAM_KAFKA_{k.upper()}": v for k, v in env.items()})


def test_plaintext_is_the_default_and_adds_nothing() -> None:
    assert client_options(settings()) == {}
    assert faust_credentials(settings()) is None


def test_sasl_over_tls_with_scram() -> None:
    s = settings(security_protocol="SASL_SSL", sasl_username="memstream-worker", sasl_password="pw")
    options = client_options(s)
    assert options["security_protocol"] == "SASL_SSL" and options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("memstream-worker", "pw")
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    credentials = faust_credentials(s)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_SSL" and credentials.mechanism.value == "SCRAM-SHA-512"


def test_tls_only_with_a_private_ca(tmp_path: Path) -> None:
    ca = Path(ssl.get_default_verify_paths().cafile or "")
    if not ca.is_file():
        pytest.skip("no system CA bundle to stand in for a private CA")
    s = settings(security_protocol="SSL", ssl_cafile=str(ca))
    assert client_options(s)["security_protocol"] == "SSL"
    assert isinstance(faust_credentials(s), faust.SSLCredentials)


@pytest.mark.parametrize(
    "env",
    [
        {"security_protocol": "SASL_SSL"},  # no user or password
        {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "u", "sasl_password": "p", "sasl_mechanism": "GSSAPI"},
        {"security_protocol": "TLS"},
    ],
)
def test_an_unusable_combination_is_refused_naming_the_variable(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="MEMSTREAM_KAFKA_SECURITY_PROTOCOL"):
        settings(**env)
