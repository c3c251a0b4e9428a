"""The orchestration service: a market round as a persisted state machine, from quote to published model."""
