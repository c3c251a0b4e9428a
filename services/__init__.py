"""The MoTS platform services: market, pricing, orchestration and evaluation (one package each)."""
