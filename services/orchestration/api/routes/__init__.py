"""One router per resource of the orchestration API."""
