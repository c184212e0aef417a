"""The Prometheus surface: one custom collector over the latest report (later issue)."""
