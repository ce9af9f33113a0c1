"""One module per resource of the contract."""
