"""The evaluation service: measures each round's model and refits the error model of Eq. (3)."""
