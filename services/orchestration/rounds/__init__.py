"""The round machine, one concept per module.

- :mod:`.machine`: the states, the allowed moves, running one step and scheduling the next.
- :mod:`.steps`: what each state does (the round's rules), from (round, ports) to a move.
- :mod:`.ports`: the seams the steps work through (services, store, trainer, schedule, clock).
- :mod:`.celery_services`: the services port over the Celery contracts.
- :mod:`.sql_store`: the round store on SQL (compare-and-set moves) and the call log (each
  step's sent calls and their replies).
- :mod:`.prometheus`: a round's figures: a finished round's summary, and the machine's
  Prometheus export.
- :mod:`.reconciler`: the worker's upkeep thread (re-drive overdue rounds, open the next
  scheduled one, expire old artifacts).
"""
