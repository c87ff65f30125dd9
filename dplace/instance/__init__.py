"""dplace.instance."""
