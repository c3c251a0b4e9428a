"""One router per resource of the pricing API."""
