"""Client-side errors, named after the official client's (``pulsar.Timeout`` …).

Errors the broker reports keep their typed :mod:`minipulsar.errors` classes; the official
client's names for the common ones are aliases of those (``TopicNotFound`` is
``TopicNotFoundError``), so either name catches them. ``retriable`` says whether the client
itself retries (lookups, reconnection) — as Pulsar's ``PulsarClientException.isRetriableError``.
"""

from minipulsar.errors import (
    ConnectionClosedError,
    ConsumerBusyError,
    InvalidCommandError,
    MiniPulsarError,
    ProducerBusyError,
    RequestTimeoutError,
    ServiceNotReadyError,
    TooManyRequestsError,
    TopicNotFoundError,
)

PulsarException = MiniPulsarError


class Timeout(RequestTimeoutError):
    """An operation (send, receive, lookup) did not finish in time."""


class AlreadyClosed(MiniPulsarError):
    """The producer, consumer or client is closed."""


class NotConnected(MiniPulsarError):
    """The producer or consumer is reconnecting; the call needs a live broker connection."""

    retriable = True


class ProducerQueueIsFull(MiniPulsarError):
    """``max_pending_messages`` messages are pending and ``block_if_queue_full`` is off."""

    retriable = True


class MemoryBufferIsFull(ProducerQueueIsFull):
    """The client's ``memory_limit_bytes`` of pending messages is used up and
    ``block_if_queue_full`` is off (Pulsar reports it as a full producer queue too)."""


class CumulativeAcknowledgementNotAllowedError(InvalidCommandError):
    """``acknowledge_cumulative`` on a Shared or Key_Shared subscription."""


class LookupError(MiniPulsarError):
    """The broker could not say who serves a topic; retried until the lookup timeout."""

    retriable = True


class TooManyLookupRedirects(LookupError):
    """A lookup was redirected more than ``max_lookup_redirects`` times: a redirect loop, not
    worth retrying."""

    retriable = False


ConnectError = ConnectionClosedError
TopicNotFound = TopicNotFoundError
ProducerBusy = ProducerBusyError
ConsumerBusy = ConsumerBusyError
ServiceUnitNotReady = ServiceNotReadyError
TooManyLookupRequestException = TooManyRequestsError
