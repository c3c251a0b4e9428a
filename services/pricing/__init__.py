"""The pricing service: SWAN's price and rewards for the registered population, and what-if queries."""
