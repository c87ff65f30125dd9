"""dplace.verify."""
