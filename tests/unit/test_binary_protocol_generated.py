"""Goal: the committed ``pulsar_api_pb2.py``/``.pyi`` are exactly what ``make proto`` makes of
``pulsar_api.proto`` (so the two never drift), and the .proto keeps the protocol's shape.

Method: run grpcio-tools' protoc in this process (its ``main``, as ``python -m
grpc_tools.protoc`` does; no child process) into a temp dir and compare bytes; then read the
generated descriptors.
"""

from __future__ import annotations

from pathlib import Path

from grpc_tools import protoc

from minipulsar.binary_protocol import pulsar_api_pb2 as api

PACKAGE = Path(api.__file__).parent
GENERATED = ("pulsar_api_pb2.py", "pulsar_api_pb2.pyi")


def test_the_committed_code_is_protocs_output_of_the_proto(tmp_path: Path) -> None:
    arguments = ["protoc", f"-I{PACKAGE}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}"]
    assert protoc.main([*arguments, str(PACKAGE / "pulsar_api.proto")]) == 0
    for name in GENERATED:
        regenerated = (tmp_path / name).read_bytes()
        assert (PACKAGE / name).read_bytes() == regenerated, f"{name} is stale: run `make proto` and commit it"


def test_every_base_command_field_is_numbered_as_its_type() -> None:
    """Pulsar numbers each sub-message of BaseCommand as its Type value (connect = 2 for
    CONNECT = 2 …): commands.body() and the broker's dispatch rely on it."""
    types = {value.number: value.name for value in api.BaseCommand.Type.DESCRIPTOR.values}
    fields = [field for field in api.BaseCommand.DESCRIPTOR.fields if field.name != "type"]
    assert fields
    for field in fields:
        assert field.number in types, field.name
        assert field.message_type is not None, field.name
    messages = [field.message_type.full_name for field in fields]
    assert len(messages) == len(set(messages)), "a Command message serves two types"


def test_the_type_enum_has_every_command_value() -> None:
    """Closed proto2 enum: a value missing here makes the client's command unparseable."""
    values = {value.number for value in api.BaseCommand.Type.DESCRIPTOR.values}
    assert values == set(range(2, 41)) | set(range(50, 69)) | set(range(70, 82))


def test_required_fields_are_where_pulsar_has_them() -> None:
    """A few that decide whether a real command parses at all."""

    def required(message: type) -> set[str]:
        return {f.name for f in message.DESCRIPTOR.fields if f.is_required}

    assert required(api.BaseCommand) == {"type"}
    assert required(api.MessageMetadata) == {"producer_name", "sequence_id", "publish_time"}
    assert required(api.SingleMessageMetadata) == {"payload_size"}
    assert required(api.CommandSend) == {"producer_id", "sequence_id"}
    assert required(api.CommandSubscribe) == {"topic", "subscription", "subType", "consumer_id", "request_id"}
    assert required(api.CommandAck) == {"consumer_id", "ack_type"}
    assert required(api.CommandConnect) == {"client_version"}
