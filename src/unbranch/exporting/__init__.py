"""The export session: the context, torch-guided retries, discovery, failures and reports."""
