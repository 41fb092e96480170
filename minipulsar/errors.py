"""The errors minipulsar raises on purpose, and the wire codes that carry them.

Every server-reported failure travels as ``ERROR {id, code, message}`` where ``code`` is one
of :class:`ErrorCode`. Each code maps to exactly one :class:`ServerError` subclass (checked at
import time), so a client turns a wire error back into the same typed exception the server
raised. Errors that never cross the wire (a dropped connection, a local timeout, a malformed
frame) derive from :class:`MiniPulsarError` directly.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class ErrorCode(str, enum.Enum):
    """Wire error codes, named as Pulsar's ``ServerError`` and BookKeeper's return codes."""

    UNKNOWN_ERROR = "UnknownError"
    INVALID_COMMAND = "InvalidCommand"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    TOO_LARGE = "TooLarge"
    AUTHENTICATION_ERROR = "AuthenticationError"
    AUTHORIZATION_ERROR = "AuthorizationError"
    SERVICE_NOT_READY = "ServiceNotReady"
    TOO_MANY_REQUESTS = "TooManyRequests"
    # broker
    TOPIC_NOT_FOUND = "TopicNotFound"
    NOT_OWNER = "NotOwner"
    PRODUCER_BUSY = "ProducerBusy"
    CONSUMER_BUSY = "ConsumerBusy"
    PRODUCER_NOT_FOUND = "ProducerNotFound"
    CONSUMER_NOT_FOUND = "ConsumerNotFound"
    SUBSCRIPTION_NOT_FOUND = "SubscriptionNotFound"
    PUBLISH_RATE_LIMITED = "PublishRateLimited"
    PERSISTENCE_ERROR = "PersistenceError"
    NOT_ENOUGH_BOOKIES = "NotEnoughBookies"
    CHECKSUM_ERROR = "ChecksumError"
    NOT_SUPPORTED = "NotSupported"
    # bookie
    LEDGER_FENCED = "LedgerFenced"
    NO_SUCH_ENTRY = "NoSuchEntry"
    NO_SUCH_LEDGER = "NoSuchLedger"
    BOOKIE_READ_ONLY = "BookieReadOnly"
    UNAUTHORIZED_ACCESS = "UnauthorizedAccess"
    # metadata store
    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    BAD_VERSION = "BadVersion"
    NOT_EMPTY = "NotEmpty"
    SESSION_EXPIRED = "SessionExpired"


class MiniPulsarError(Exception):
    """Base of every error minipulsar raises on purpose."""

    retriable: ClassVar[bool] = False
    """The same request may succeed if sent again."""


class ConfigError(MiniPulsarError):
    """A config file or flag holds a value the process cannot run with."""


class ProtocolError(MiniPulsarError):
    """Bytes that do not form a valid frame or command."""


class FrameTooLargeError(ProtocolError):
    """A frame's length prefix exceeds the connection's max frame size. Fatal to the connection."""


class MalformedCommandError(ProtocolError):
    """A well-framed body that is not a valid command. The connection survives.

    ``request_id`` is set when the body was a map with a usable ``id``, so the peer can be
    answered with an ERROR that completes its request; ``code`` is what that ERROR says
    (``NotSupported`` for a well-formed command of Pulsar's that this build does not serve).
    """

    def __init__(
        self, message: str, request_id: int | None = None, code: ErrorCode = ErrorCode.INVALID_COMMAND
    ) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.code = code


class ConnectionClosedError(MiniPulsarError):
    """The connection dropped before the request was answered."""

    retriable = True


class RequestTimeoutError(MiniPulsarError):
    """No answer arrived within the request's timeout."""

    retriable = True


class ServerError(MiniPulsarError):
    """Reported by the peer as an :class:`ErrorCode`; exactly one subclass per code."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_ERROR


class UnknownServerError(ServerError):
    code = ErrorCode.UNKNOWN_ERROR


class InvalidCommandError(ServerError):
    """The peer decoded the request and refused it: a field of the wrong type or range, or a
    request this connection may not send now (wire code ``InvalidCommand``). Compare
    :class:`MalformedCommandError`, raised locally on a body that does not decode."""

    code = ErrorCode.INVALID_COMMAND


class UnsupportedVersionError(ServerError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TooLargeError(ServerError):
    code = ErrorCode.TOO_LARGE


class AuthenticationError(ServerError):
    code = ErrorCode.AUTHENTICATION_ERROR


class AuthorizationError(ServerError):
    code = ErrorCode.AUTHORIZATION_ERROR


class ServiceNotReadyError(ServerError):
    code = ErrorCode.SERVICE_NOT_READY
    retriable = True


class TooManyRequestsError(ServerError):
    code = ErrorCode.TOO_MANY_REQUESTS
    retriable = True


class TopicNotFoundError(ServerError):
    code = ErrorCode.TOPIC_NOT_FOUND


class NotOwnerError(ServerError):
    code = ErrorCode.NOT_OWNER
    retriable = True


class ProducerBusyError(ServerError):
    code = ErrorCode.PRODUCER_BUSY


class ConsumerBusyError(ServerError):
    code = ErrorCode.CONSUMER_BUSY


class ProducerNotFoundError(ServerError):
    code = ErrorCode.PRODUCER_NOT_FOUND


class ConsumerNotFoundError(ServerError):
    code = ErrorCode.CONSUMER_NOT_FOUND


class SubscriptionNotFoundError(ServerError):
    code = ErrorCode.SUBSCRIPTION_NOT_FOUND


class PublishRateLimitedError(ServerError):
    code = ErrorCode.PUBLISH_RATE_LIMITED
    retriable = True


class PersistenceError(ServerError):
    code = ErrorCode.PERSISTENCE_ERROR
    retriable = True


class NotEnoughBookiesError(ServerError):
    code = ErrorCode.NOT_ENOUGH_BOOKIES
    retriable = True


class ChecksumError(ServerError):
    """A message whose CRC32C does not match its bytes (Pulsar's ``ChecksumError``): the
    broker refuses that send unwritten."""

    code = ErrorCode.CHECKSUM_ERROR


class NotSupportedError(ServerError):
    """A command or feature this build does not serve yet (schemas, transactions): refused by
    name, never left unanswered."""

    code = ErrorCode.NOT_SUPPORTED


class LedgerFencedError(ServerError):
    code = ErrorCode.LEDGER_FENCED


class NoSuchEntryError(ServerError):
    code = ErrorCode.NO_SUCH_ENTRY


class NoSuchLedgerError(ServerError):
    code = ErrorCode.NO_SUCH_LEDGER


class UnauthorizedAccessError(ServerError):
    """An add or a fencing read whose master key is not the ledger's (BookKeeper's
    ``UnauthorizedAccessException``): the writer does not hold the ledger's password."""

    code = ErrorCode.UNAUTHORIZED_ACCESS


class BookieReadOnlyError(ServerError):
    code = ErrorCode.BOOKIE_READ_ONLY
    retriable = True


class NotFoundError(ServerError):
    code = ErrorCode.NOT_FOUND


class AlreadyExistsError(ServerError):
    code = ErrorCode.ALREADY_EXISTS


class BadVersionError(ServerError):
    code = ErrorCode.BAD_VERSION


class NotEmptyError(ServerError):
    code = ErrorCode.NOT_EMPTY


class SessionExpiredError(ServerError):
    code = ErrorCode.SESSION_EXPIRED


def _build_registry() -> dict[ErrorCode, type[ServerError]]:
    registry: dict[ErrorCode, type[ServerError]] = {}
    pending = list(ServerError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.code in registry:
            raise AssertionError(f"{cls.code} has two classes: {registry[cls.code]} and {cls}")
        registry[cls.code] = cls
    missing = set(ErrorCode) - set(registry)
    assert not missing, f"error codes without a class: {missing}"
    return registry


_REGISTRY = _build_registry()


def error_for_code(code: str, message: str = "") -> ServerError:
    """The typed exception for a wire ``code``; an unknown code becomes :class:`UnknownServerError`."""
    try:
        cls = _REGISTRY[ErrorCode(code)]
    except ValueError:
        return UnknownServerError(f"{code}: {message}")
    return cls(message)


def code_for_error(error: BaseException) -> ErrorCode:
    """The wire code to report ``error`` with; anything not a ServerError is UnknownError."""
    if isinstance(error, ServerError):
        return error.code
    if isinstance(error, MalformedCommandError):
        return ErrorCode.INVALID_COMMAND
    if isinstance(error, FrameTooLargeError):
        return ErrorCode.TOO_LARGE
    return ErrorCode.UNKNOWN_ERROR
