"""Operating exon as a service: Prometheus metrics (:mod:`.metrics`), health endpoints
(:mod:`.health`), systemd readiness and watchdog (:mod:`.systemd`), and a Grafana
dashboard (``dashboard.json``)."""
