"""`StoreError`: a database problem, in words that name the file. Its own
module so that the Store (`store/db.py`) and its reads (`store/reads.py`)
raise the same class."""


class StoreError(Exception):
    """A database problem, in words that name the file."""
