"""The platform on one machine: start the services (launcher), simulate clients (agents), run the demo.

Used by `mots demo`, `mots platform up`, the benchmarks and the integration tests; the services
themselves never import it (their shared glue is :mod:`mots.platform`).
"""
