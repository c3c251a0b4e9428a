"""The platform's REST contracts, one module per API: :mod:`.market` (the market's routes),
:mod:`.pricing` (the pricing service's), :mod:`.rounds` (the orchestration's round API), and
:mod:`.base` (what they share: limits, pages, the round states). Services and the SDK
(:mod:`mots.client`) use the same models. Money crosses every boundary as a Decimal string with
at most six decimal places (:mod:`mots.platform.money`). The payloads of cross-service Celery
tasks live beside their ``TaskSpec`` in :mod:`mots.platform.contracts`.
"""
