"""What memstream says about itself: traces across stages, Prometheus metrics, liveness and readiness."""
