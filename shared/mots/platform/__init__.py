"""Glue the four platform services share: settings base, JSON schemas, Celery factory, metrics, money."""
