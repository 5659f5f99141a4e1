"""The Kafka plumbing: the embedded broker, the transport and its fetch wait, true end offsets, TLS/SASL, the codec
and the forgotten-scopes ledger.
"""
