"""The market service: client registration and auth, quotes, decisions, purchases and the ledger."""
