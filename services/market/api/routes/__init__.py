"""One router per resource of the market API."""
