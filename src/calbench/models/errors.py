"""The error raised when a dataset or pretrained weight is neither cached nor downloadable."""


class OfflineError(RuntimeError):
    """A download failed; the message says what was tried and how to provide the file offline."""
