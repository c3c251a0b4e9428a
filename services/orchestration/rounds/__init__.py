"""The round machine, one concept per module.

- :mod:`.machine`: the states, the allowed moves, running one step and scheduling the next.
- :mod:`.steps`: what each state does (the round's rules), from (round, ports) to a move.
- :mod:`.ports`: the seams the steps work through (a call by TaskSpec, store, schedule, clock).
- :mod:`.calls`: a step's calls by the contracts' TaskSpecs, over Celery and the call log.
- :mod:`.sql_store`: the round store on SQL (compare-and-set moves) and the call log (each
  step's sent calls and their replies).
- :mod:`.prometheus`: a round's figures: a finished round's summary, and the machine's
  Prometheus export.
- :mod:`.reconciler`: the worker's upkeep thread (re-drive overdue rounds, open the next
  scheduled one, expire old artifacts).
"""
