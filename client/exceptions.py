"""Client-side errors, named after the official client's (``pulsar.Timeout`` …)."""

from minipulsar.errors import ConnectionClosedError, InvalidCommand, MiniPulsarError, RequestTimeoutError

PulsarException = MiniPulsarError


class Timeout(RequestTimeoutError):
    """An operation (send, receive, lookup) did not finish in time."""


class AlreadyClosed(MiniPulsarError):
    """The producer, consumer or client is closed."""


class ProducerQueueIsFull(MiniPulsarError):
    """``max_pending_messages`` sends are in flight and ``block_if_queue_full`` is off."""

    retriable = True


class CumulativeAcknowledgementNotAllowedError(InvalidCommand):
    """``acknowledge_cumulative`` on a Shared or Key_Shared subscription."""


class LookupError(MiniPulsarError):  # noqa: A001 - the official client's name
    """The lookup failed or redirected too many times."""


ConnectError = ConnectionClosedError
