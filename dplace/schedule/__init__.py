"""dplace.schedule."""
