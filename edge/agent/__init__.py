"""The edge agent: registers a device with the market and plays the client's best response (Eq. 6).

Run as ``python -m edge.agent run``; ``python -m edge.agent supernode`` starts the Flower SuperNode
with this device's facts in its node config.
"""
