"""PROTOBUF schemas of the registry: parsing, rendering, references and compatibility.

The known-answer table states Confluent's decisions. Cases 0-53 are the pairs of Confluent's
own Protobuf diff test resource (schema-registry, protobuf-provider/src/test/resources/
diff-schema-examples.json, entry N = case N), with its expected change lists and verdicts
taken as facts; writer = "original_schema", reader = "update_schema". The cases numbered
from 100 follow Confluent's documented Protobuf rules: the scalar groups of its diff
(protobuf-provider FieldSchemaDiff.scalarKind: int32/int64/uint32/uint64/bool and enums;
sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double), labels
compared only for scalars and only where both are written (FieldSchemaDiff
.compareScalarTypes), a field's message type compared at the field only when one side
imports it (FieldSchemaDiff.compareMessageTypes), and its list of compatible change types
(SchemaDiff.COMPATIBLE_CHANGES). Confluent's diff has no change type for the syntax line.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from minibroker.schema_registry.schemas import InvalidSchema, schema_type
from minibroker.schema_registry.schemas import protobuf as pb

PROTOBUF = schema_type("PROTOBUF")


@dataclass(frozen=True)
class Case:
    number: int
    description: str
    writer: str
    reader: str
    compatible: bool
    changes: tuple[str, ...]
    writer_imports: tuple[tuple[str, str], ...] = ()
    reader_imports: tuple[tuple[str, str], ...] = ()


CASES = [
    Case(
        0,
        "Allow addition of un-reserved property",
        writer="""\
syntax = "proto3";
package foo;
message TestMessage {
    string test_string = 1;
    .foo.TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
package foo;

message TestMessage {
  string test_string = 1;
  .foo.TestMessage.Status test_int = 2;
  float test_float = 3;

  message Status {
    string test_string = 1;
  }
}
""",
        compatible=True,
        changes=("FIELD_ADDED #/TestMessage/3",),
    ),
    Case(
        1,
        "Detect package change",
        writer="""\
syntax = "proto3";
package foo;
message TestMessage {
    string test_string = 1;
    .foo.TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
package bar;
message TestMessage {
    string test_string = 1;
    .bar.TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=False,
        changes=("PACKAGE_CHANGED #/",),
    ),
    Case(
        2,
        "Detect change to name qualification",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    .TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        3,
        "Detect change to name qualification with package",
        writer="""\
syntax = "proto3";
package foo;
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
package foo;
message TestMessage {
    string test_string = 1;
    .foo.TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        4,
        "Detect added field",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        compatible=True,
        changes=("FIELD_ADDED #/TestMessage/2",),
    ),
    Case(
        5,
        "Detect added required field",
        writer="""\
syntax = "proto2";
message TestMessage {
    optional string test_string = 1;
}
""",
        reader="""\
syntax = "proto2";
message TestMessage {
    optional string test_string = 1;
    required string test_string2 = 2;
}
""",
        compatible=False,
        changes=("REQUIRED_FIELD_ADDED #/TestMessage/2",),
    ),
    Case(
        6,
        "Detect added field to nested type",
        writer="""\
syntax = "proto3";
message Wrapper {
    int32 wrapperInt = 1;
    message TestMessage {
    string test_string = 1;
}
}
""",
        reader="""\
syntax = "proto3";
message Wrapper {
    int32 wrapperInt = 1;
    message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
}
""",
        compatible=True,
        changes=("FIELD_ADDED #/Wrapper/TestMessage/2",),
    ),
    Case(
        7,
        "Detect removed field",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
""",
        compatible=True,
        changes=("FIELD_REMOVED #/TestMessage/2",),
    ),
    Case(
        8,
        "Detect removed required field",
        writer="""\
syntax = "proto2";
message TestMessage {
    optional string test_string = 1;
    required string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto2";
message TestMessage {
    optional string test_string = 1;
}
""",
        compatible=False,
        changes=("REQUIRED_FIELD_REMOVED #/TestMessage/2",),
    ),
    Case(
        9,
        "Detect changed field number",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 2;
}
""",
        compatible=True,
        changes=("FIELD_REMOVED #/TestMessage/1", "FIELD_ADDED #/TestMessage/2"),
    ),
    Case(
        10,
        "Detect compatible field number type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int64 test_int = 2;
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        11,
        "Detect compatible field string type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    bytes test_string2 = 2;
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        12,
        "Detect field number type to enum change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
}
enum Status {
    ACTIVE = 0;
    INACTIVE = 1;
}
""",
        compatible=True,
        changes=("ENUM_ADDED #/Status",),
    ),
    Case(
        13,
        "Detect enum type to field number change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
}
enum Status {
    ACTIVE = 0;
    INACTIVE = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        compatible=True,
        changes=("ENUM_REMOVED #/Status",),
    ),
    Case(
        14,
        "Detect field number type to message with same name as enum",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    .TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
enum Status {
    ACTIVE = 0;
    INACTIVE = 1;
}
""",
        compatible=False,
        changes=(
            "FIELD_KIND_CHANGED #/TestMessage/2",
            "MESSAGE_ADDED #/TestMessage/Status",
            "ENUM_ADDED #/Status",
        ),
    ),
    Case(
        15,
        "Detect message with same name as enum to field number change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    .TestMessage.Status test_int = 2;
    message Status {
    string test_string = 1;
    }
}
enum Status {
    ACTIVE = 0;
    INACTIVE = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        compatible=False,
        changes=(
            "FIELD_KIND_CHANGED #/TestMessage/2",
            "MESSAGE_REMOVED #/TestMessage/Status",
            "ENUM_REMOVED #/Status",
        ),
    ),
    Case(
        16,
        "Detect enum const change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
}
enum Status {
    ACTIVE = 0;
    INACTIVE = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    Status test_int = 2;
}
enum Status {
    ACTIVE = 0;
    NOT_ACTIVE = 1;
}
""",
        compatible=True,
        changes=("ENUM_CONST_CHANGED #/Status/1",),
    ),
    Case(
        17,
        "Detect compatible field to oneof change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    oneof new_oneof {
        string test_string2 = 2;
        int32 other_id = 3;
}
}
""",
        compatible=True,
        changes=(
            "ONEOF_ADDED #/TestMessage/new_oneof",
            "ONEOF_FIELD_ADDED #/TestMessage/new_oneof/3",
        ),
    ),
    Case(
        18,
        "Detect incompatible field to oneof change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
        int32 other_id = 3;
}
}
""",
        compatible=False,
        changes=(
            "MULTIPLE_FIELDS_MOVED_TO_ONEOF #/TestMessage/new_oneof",
            "ONEOF_ADDED #/TestMessage/new_oneof",
            "ONEOF_FIELD_ADDED #/TestMessage/new_oneof/3",
        ),
    ),
    Case(
        19,
        "Detect compatible add field to oneof",
        writer="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
}
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
        int32 other_id = 3;
}
}
""",
        compatible=True,
        changes=("ONEOF_FIELD_ADDED #/TestMessage/new_oneof/3",),
    ),
    Case(
        20,
        "Detect incompatible remove field from oneof",
        writer="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
        int32 other_id = 3;
}
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
}
}
""",
        compatible=False,
        changes=("ONEOF_FIELD_REMOVED #/TestMessage/new_oneof/3",),
    ),
    Case(
        21,
        "Detect compatible move field to oneof",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    oneof new_oneof {
    string test_string2 = 2;
}
}
""",
        compatible=True,
        changes=("ONEOF_ADDED #/TestMessage/new_oneof",),
    ),
    Case(
        22,
        "Detect incompatible move field to oneof",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    oneof new_oneof {
    string test_string2 = 2;
    string test_string3 = 3;
}
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof {
    string test_string = 1;
    string test_string2 = 2;
    string test_string3 = 3;
}
}
""",
        compatible=False,
        changes=("FIELD_MOVED_TO_EXISTING_ONEOF #/TestMessage/new_oneof",),
    ),
    Case(
        23,
        "Detect incompatible move field to renamed oneof",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    oneof new_oneof {
    string test_string2 = 2;
    string test_string3 = 3;
}
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    oneof new_oneof_2 {
    string test_string = 1;
    string test_string2 = 2;
    string test_string3 = 3;
}
}
""",
        compatible=False,
        changes=(
            "FIELD_MOVED_TO_EXISTING_ONEOF #/TestMessage/new_oneof_2",
            "ONEOF_REMOVED #/TestMessage/new_oneof",
            "ONEOF_ADDED #/TestMessage/new_oneof_2",
        ),
    ),
    Case(
        24,
        "Detect incompatible field type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    TestMessage2 test_int = 2;
}
message TestMessage2 {
    string s1 = 1;
}
""",
        compatible=False,
        changes=("MESSAGE_ADDED #/TestMessage2", "FIELD_KIND_CHANGED #/TestMessage/2"),
    ),
    Case(
        25,
        "Detect incompatible field type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    int32 test_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    string test_string2 = 2;
}
""",
        compatible=False,
        changes=("FIELD_NAME_CHANGED #/TestMessage/2", "FIELD_SCALAR_KIND_CHANGED #/TestMessage/2"),
    ),
    Case(
        26,
        "Detect incompatible field type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    TestMessage2 test_int = 2;
}
message TestMessage2 {
    string s1 = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    TestMessage3 test_int = 2;
}
message TestMessage3 {
    string s1 = 1;
}
""",
        compatible=False,
        changes=(
            "MESSAGE_REMOVED #/TestMessage2",
            "MESSAGE_ADDED #/TestMessage3",
            "FIELD_NAMED_TYPE_CHANGED #/TestMessage/2",
        ),
    ),
    Case(
        27,
        "Detect incompatible field type change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    map<string, int32> test_map_int = 2;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    map<string, string> test_map_string = 2;
}
""",
        compatible=False,
        changes=("FIELD_NAME_CHANGED #/TestMessage/2", "FIELD_SCALAR_KIND_CHANGED #/TestMessage/2"),
    ),
    Case(
        28,
        "Detect compatible name qualification in map",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    map<string, Status> test_map = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    map<string, TestMessage.Status> test_map = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        29,
        "Detect compatible field label change for message",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    optional Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
    repeated Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=(),
    ),
    Case(
        30,
        "Detect compatible field label change for string",
        writer="""\
syntax = "proto3";
message TestMessage {
    optional string test_string = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    repeated string test_string = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=("FIELD_STRING_OR_BYTES_LABEL_CHANGED #/TestMessage/1",),
    ),
    Case(
        31,
        "Detect compatible field label change for bytes",
        writer="""\
syntax = "proto3";
message TestMessage {
    optional bytes test_bytes = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    repeated bytes test_bytes = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=True,
        changes=("FIELD_STRING_OR_BYTES_LABEL_CHANGED #/TestMessage/1",),
    ),
    Case(
        32,
        "Detect incompatible field label change for number",
        writer="""\
syntax = "proto3";
message TestMessage {
    optional int32 test_int = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    repeated int32 test_int = 1;
    Status test_status = 2;
    message Status {
    string test_string = 1;
    }
}
""",
        compatible=False,
        changes=("FIELD_NUMERIC_LABEL_CHANGED #/TestMessage/1",),
    ),
    Case(
        33,
        "Detect compatible message addition",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
message TestMessage2 {
    string test_string = 1;
}
""",
        compatible=True,
        changes=("MESSAGE_ADDED #/TestMessage2",),
    ),
    Case(
        34,
        "Detect compatible message index change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage2 {
    string test_string = 1;
}
message TestMessage {
    string test_string = 1;
}
""",
        compatible=True,
        changes=("MESSAGE_ADDED #/TestMessage2", "MESSAGE_MOVED #/TestMessage"),
    ),
    Case(
        35,
        "Detect compatible message index change",
        writer="""\
syntax = "proto3";
message TestMessage {
    string test_string = 1;
}
message TestMessage2 {
    string test_string = 1;
}
""",
        reader="""\
syntax = "proto3";
message TestMessage2 {
    string test_string = 1;
}
message TestMessage {
    string test_string = 1;
}
""",
        compatible=True,
        changes=("MESSAGE_MOVED #/TestMessage2", "MESSAGE_MOVED #/TestMessage"),
    ),
    Case(
        36,
        "Detect incompatible import change",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
import "google2.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.GoogleHome test_string = 1;
    }
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        reader_imports=(
            (
                "google2.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl2";

message GoogleHome {
  string deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        compatible=False,
        changes=(
            "FIELD_SCALAR_KIND_CHANGED #/GoogleHome/1",
            "FIELD_NAMED_TYPE_CHANGED #/TestMessage/1",
        ),
    ),
    Case(
        37,
        "Detect moving to import",
        writer="""\
syntax = "proto3";
message TestMessage {
    GoogleHome test_string = 1;
    }
message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
        reader="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.GoogleHome test_string = 1;
    }
""",
        reader_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        compatible=False,
        changes=("MESSAGE_REMOVED #/GoogleHome",),
    ),
    Case(
        38,
        "Detect moving from import",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
message TestMessage {
    GoogleHome test_string = 1;
    }
message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        compatible=True,
        changes=("MESSAGE_ADDED #/GoogleHome",),
    ),
    Case(
        39,
        "Detect import change with different remote package name",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
import "google2.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain2.GoogleHome test_string = 1;
    }
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        reader_imports=(
            (
                "google2.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain2;

option java_outer_classname = "GoogleImpl2";

message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
""",
            ),
        ),
        compatible=True,
        changes=(),
    ),
    Case(
        40,
        "Detect import change with different remote package nested name",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.outer.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
import "google2.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain2.outer.GoogleHome test_string = 1;
    }
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message outer {
  message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        reader_imports=(
            (
                "google2.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain2;

option java_outer_classname = "GoogleImpl2";

message outer {
  message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        compatible=True,
        changes=(),
    ),
    Case(
        41,
        "Detect incompatible import change with different remote package nested name",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.outer.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
import "google2.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain2.outer.GoogleHome test_string = 1;
    }
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message outer {
  message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        reader_imports=(
            (
                "google2.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain2;

option java_outer_classname = "GoogleImpl2";

message outer {
  message GoogleHome {
  string deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        compatible=False,
        changes=(
            "FIELD_SCALAR_KIND_CHANGED #/outer/GoogleHome/1",
            "FIELD_NAMED_TYPE_CHANGED #/TestMessage/1",
        ),
    ),
    Case(
        42,
        "Detect incompatible import change with same subject, different version",
        writer="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain.outer.GoogleHome test_string = 1;
    }
""",
        reader="""\
syntax = "proto3";
import "google.proto";
message TestMessage {
    .io.confluent.cloud.demo.domain2.outer.GoogleHome test_string = 1;
    }
""",
        writer_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain;

option java_outer_classname = "GoogleImpl";

message outer {
  message GoogleHome {
  int32 deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        reader_imports=(
            (
                "google.proto",
                """\
syntax = "proto3";

package io.confluent.cloud.demo.domain2;

option java_outer_classname = "GoogleImpl2";

message outer {
  message GoogleHome {
  string deviceID = 1;
  bool enabled = 2;
}
}
""",
            ),
        ),
        compatible=False,
        changes=(
            "FIELD_SCALAR_KIND_CHANGED #/outer/GoogleHome/1",
            "FIELD_NAMED_TYPE_CHANGED #/TestMessage/1",
        ),
    ),
    Case(
        43,
        "Detect incompatible field type change when enclosing oneof is renamed",
        writer="""\
syntax = "proto3";
message Message {
  oneof oldOneOf {
    float field_float = 1;
    int32 field_with_incompatible_type_change = 2;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof renamedOneOf {
    float field_float = 1;
    string field_with_incompatible_type_change = 2;
  }
}
""",
        compatible=False,
        changes=(
            "ONEOF_REMOVED #/Message/oldOneOf",
            "ONEOF_ADDED #/Message/renamedOneOf",
            "FIELD_SCALAR_KIND_CHANGED #/Message/renamedOneOf/2",
        ),
    ),
    Case(
        44,
        "Detect incompatible field type change when field is moved out of a removed oneof",
        writer="""\
syntax = "proto3";
message Message {
  oneof oldOneOf {
    float field_float = 1;
    int32 field_with_incompatible_type_change = 2;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  float field_float = 1;
  sint64 field_with_incompatible_type_change = 2;
}
""",
        compatible=False,
        changes=(
            "ONEOF_REMOVED #/Message/oldOneOf",
            "ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Message/1",
            "ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Message/2",
            "FIELD_SCALAR_KIND_CHANGED #/Message/2",
        ),
    ),
    Case(
        45,
        "Detect incompatible field type change when field is moved into a new oneof",
        writer="""\
syntax = "proto3";
message Message {
  float field_float = 1;
  int32 field_with_incompatible_type_change = 2;
}
""",
        reader="""\
syntax = "proto3";
message Message {
  float field_float = 1;
  oneof newOneOf {
    sint64 field_with_incompatible_type_change = 2;
  }
}
""",
        compatible=False,
        changes=(
            "ONEOF_ADDED #/Message/newOneOf",
            "FIELD_SCALAR_KIND_CHANGED #/Message/newOneOf/2",
        ),
    ),
    Case(
        46,
        "Detect compatible oneof rename with identical fields",
        writer="""\
syntax = "proto3";
message Message {
  oneof oldOneOf {
    float field_float = 1;
    int32 field_int = 2;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof renamedOneOf {
    float field_float = 1;
    int32 field_int = 2;
  }
}
""",
        compatible=True,
        changes=("ONEOF_REMOVED #/Message/oldOneOf", "ONEOF_ADDED #/Message/renamedOneOf"),
    ),
    Case(
        47,
        "Detect incompatible field move between two differently-named oneofs",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_a {
    int32 field_1 = 1;
    int32 field_2 = 2;
  }
  oneof oneof_b {
    int32 field_3 = 3;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_a {
    int32 field_1 = 1;
  }
  oneof oneof_b {
    int32 field_3 = 3;
    int32 field_2 = 2;
  }
}
""",
        compatible=False,
        changes=("FIELD_MOVED_TO_EXISTING_ONEOF #/Message/oneof_b",),
    ),
    Case(
        48,
        "Detect incompatible move of a field from a deleted oneof into an existing oneof",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_a { int32 field_a = 1; }
  oneof oneof_b { int32 field_b = 3; }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_b { int32 field_b = 3; int32 field_a = 1; }
}
""",
        compatible=False,
        changes=(
            "FIELD_MOVED_TO_EXISTING_ONEOF #/Message/oneof_b",
            "ONEOF_REMOVED #/Message/oneof_a",
        ),
    ),
    Case(
        49,
        "Detect incompatible merge of two oneofs into a new oneof",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_a { int32 field_a = 1; }
  oneof oneof_b { int32 field_b = 2; }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_c { int32 field_a = 1; int32 field_b = 2; }
}
""",
        compatible=False,
        changes=(
            "FIELD_MOVED_TO_EXISTING_ONEOF #/Message/oneof_c",
            "ONEOF_REMOVED #/Message/oneof_a",
            "ONEOF_REMOVED #/Message/oneof_b",
            "ONEOF_ADDED #/Message/oneof_c",
        ),
    ),
    Case(
        50,
        "Detect compatible move of a single field into a new singleton oneof from a surviving "
        "oneof",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_a { int32 field_a = 1; int32 field_b = 2; }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_a { int32 field_b = 2; }
  oneof oneof_b { int32 field_a = 1; }
}
""",
        compatible=True,
        changes=("ONEOF_ADDED #/Message/oneof_b",),
    ),
    Case(
        51,
        "Detect incompatible drop of a oneof member while renaming the oneof",
        writer="""\
syntax = "proto3";
message Message {
  oneof g { int32 a = 1; int32 b = 2; }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof g2 { int32 a = 1; }
}
""",
        compatible=False,
        changes=(
            "ONEOF_REMOVED #/Message/g",
            "ONEOF_ADDED #/Message/g2",
            "ONEOF_FIELD_REMOVED #/Message/g/2",
        ),
    ),
    Case(
        52,
        "Detect compatible move field out of a oneof to top level",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_x {
    int32 field_a = 1;
    int32 field_b = 2;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_x {
    int32 field_a = 1;
  }
  int32 field_b = 2;
}
""",
        compatible=True,
        changes=("ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Message/2",),
    ),
    Case(
        53,
        "Detect incompatible type change when field moved out of a oneof to top level",
        writer="""\
syntax = "proto3";
message Message {
  oneof oneof_x {
    int32 field_a = 1;
    int32 field_b = 2;
  }
}
""",
        reader="""\
syntax = "proto3";
message Message {
  oneof oneof_x {
    int32 field_a = 1;
  }
  string field_b = 2;
}
""",
        compatible=False,
        changes=(
            "ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Message/2",
            "FIELD_SCALAR_KIND_CHANGED #/Message/2",
        ),
    ),
]


def _one_field(syntax: str, declaration: str, extra: str = "") -> str:
    return f'syntax = "{syntax}";\nmessage M {{\n  {declaration}\n}}\n{extra}'


def _scalar_case(number: int, old: str, new: str, compatible: bool) -> Case:
    return Case(
        number,
        f"{old} -> {new}",
        writer=_one_field("proto3", f"{old} f = 1;"),
        reader=_one_field("proto3", f"{new} f = 1;"),
        compatible=compatible,
        changes=() if compatible else ("FIELD_SCALAR_KIND_CHANGED #/M/1",),
    )


NESTED = "message N {\n  int32 a = 1;\n}\n"
NESTED_STRING = "message N {\n  string a = 1;\n}\n"
ENUM = "enum E {\n  A = 0;\n  B = 1;\n}\n"

CASES += [
    _scalar_case(100, "int32", "uint64", True),
    _scalar_case(101, "int64", "bool", True),
    _scalar_case(102, "int32", "sint32", False),
    _scalar_case(103, "sint32", "sint64", True),
    _scalar_case(104, "fixed32", "sfixed32", True),
    _scalar_case(105, "fixed64", "sfixed64", True),
    _scalar_case(106, "fixed32", "fixed64", False),
    _scalar_case(107, "float", "double", False),
    _scalar_case(108, "string", "int32", False),
    _scalar_case(109, "bytes", "string", True),
    Case(
        110,
        "enum -> int64 (enums are general numbers)",
        writer=_one_field("proto3", "E f = 1;", ENUM),
        reader=_one_field("proto3", "int64 f = 1;", ENUM),
        compatible=True,
        changes=(),
    ),
    Case(
        111,
        "string -> message",
        writer=_one_field("proto3", "string f = 1;", NESTED),
        reader=_one_field("proto3", "N f = 1;", NESTED),
        compatible=False,
        changes=("FIELD_KIND_CHANGED #/M/1",),
    ),
    Case(
        112,
        "map value int32 -> int64",
        writer=_one_field("proto3", "map<string, int32> f = 1;"),
        reader=_one_field("proto3", "map<string, int64> f = 1;"),
        compatible=True,
        changes=(),
    ),
    Case(
        113,
        "map -> string",
        writer=_one_field("proto3", "map<string, string> f = 1;"),
        reader=_one_field("proto3", "string f = 1;"),
        compatible=False,
        changes=("FIELD_KIND_CHANGED #/M/1",),
    ),
    Case(
        114,
        "field renamed, number kept",
        writer=_one_field("proto3", "string f = 1;"),
        reader=_one_field("proto3", "string renamed = 1;"),
        compatible=True,
        changes=("FIELD_NAME_CHANGED #/M/1",),
    ),
    Case(
        115,
        "a field's local message type changes incompatibly (reported where it is declared)",
        writer=_one_field("proto3", "N f = 1;", NESTED),
        reader=_one_field("proto3", "N f = 1;", NESTED_STRING),
        compatible=False,
        changes=("FIELD_SCALAR_KIND_CHANGED #/N/1",),
    ),
    Case(
        116,
        "repeated message -> singular message (labels of messages are not compared)",
        writer=_one_field("proto3", "repeated N f = 1;", NESTED),
        reader=_one_field("proto3", "N f = 1;", NESTED),
        compatible=True,
        changes=(),
    ),
    Case(
        117,
        "proto2 repeated int32 -> optional int32",
        writer=_one_field("proto2", "repeated int32 f = 1;"),
        reader=_one_field("proto2", "optional int32 f = 1;"),
        compatible=False,
        changes=("FIELD_NUMERIC_LABEL_CHANGED #/M/1",),
    ),
    Case(
        118,
        "proto2 required int32 -> optional int32",
        writer=_one_field("proto2", "required int32 f = 1;"),
        reader=_one_field("proto2", "optional int32 f = 1;"),
        compatible=False,
        changes=("FIELD_NUMERIC_LABEL_CHANGED #/M/1",),
    ),
    Case(
        119,
        "proto3 unlabelled int32 -> repeated int32 (no label written: not compared)",
        writer=_one_field("proto3", "int32 f = 1;"),
        reader=_one_field("proto3", "repeated int32 f = 1;"),
        compatible=True,
        changes=(),
    ),
    Case(
        120,
        "a top-level message removed",
        writer=_one_field("proto3", "int32 f = 1;", NESTED),
        reader=_one_field("proto3", "int32 f = 1;"),
        compatible=False,
        changes=("MESSAGE_REMOVED #/N",),
    ),
    Case(
        121,
        "an enum constant removed",
        writer=_one_field("proto3", "E f = 1;", ENUM),
        reader=_one_field("proto3", "E f = 1;", "enum E {\n  A = 0;\n}\n"),
        compatible=True,
        changes=("ENUM_CONST_REMOVED #/E/1",),
    ),
    Case(
        122,
        "proto2 optional -> proto3 unlabelled (the syntax itself is not compared)",
        writer=_one_field("proto2", "optional string f = 1;"),
        reader=_one_field("proto3", "string f = 1;"),
        compatible=True,
        changes=(),
    ),
    Case(
        123,
        "a field moved into a nested message's place by number (names ignored)",
        writer=_one_field("proto3", "int32 a = 1;\n  string b = 2;"),
        reader=_one_field("proto3", "int64 b = 1;\n  bytes a = 2;"),
        compatible=True,
        changes=("FIELD_NAME_CHANGED #/M/1", "FIELD_NAME_CHANGED #/M/2"),
    ),
]


def _parse(text: str, imports: tuple[tuple[str, str], ...]) -> pb.ProtobufSchema:
    schema = PROTOBUF.parse(text, list(imports))
    assert isinstance(schema, pb.ProtobufSchema)
    return schema


def _serialized(text: str, imports: tuple[tuple[str, str], ...]) -> pb.ProtobufSchema:
    """The same schema registered the way confluent-kafka does: base64 descriptors."""
    encoded: list[tuple[str, str]] = []
    for name, dep in imports:
        encoded.append((name, _parse(dep, tuple(encoded)).formatted("serialized")))
    return _parse(_parse(text, imports).formatted("serialized"), tuple(encoded))


@pytest.mark.parametrize("form", ["text", "serialized"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.number}")
def test_known_answers(case: Case, form: str) -> None:
    load = _parse if form == "text" else _serialized
    writer = load(case.writer, case.writer_imports)
    reader = load(case.reader, case.reader_imports)
    assert pb.summary(pb.differences(writer, reader)) == Counter(case.changes), case.description
    problems = PROTOBUF.reader_errors(reader, writer)
    assert (not problems) == case.compatible, case.description
    incompatible = [c for c in case.changes if c.split()[0] not in pb.COMPATIBLE_CHANGES]
    assert Counter(f"{p.error_type} {p.description.split(chr(39))[1]}" for p in problems) == (
        Counter(incompatible)
    )


def test_table_size() -> None:
    assert len(CASES) >= 40
    assert len({c.number for c in CASES}) == len(CASES)


def test_problem_descriptions_name_reader_and_writer() -> None:
    writer = _parse(_one_field("proto2", "optional int32 f = 1;"), ())
    reader = _parse(_one_field("proto2", "optional int32 f = 1;\n  required int32 g = 2;"), ())
    (problem,) = PROTOBUF.reader_errors(reader, writer)
    assert problem.error_type == "REQUIRED_FIELD_ADDED"
    assert problem.description % ("new", "old") == (
        "A required field  at path '#/M/2' in the new schema is missing in the old schema"
    )
    (problem,) = PROTOBUF.reader_errors(writer, reader)
    assert problem.error_type == "REQUIRED_FIELD_REMOVED"
    assert problem.description % ("old", "new") == (
        "The old schema is missing a required field at path: '#/M/2' in the new schema"
    )


def test_verbose_message_in_confluent_wording() -> None:
    writer = _parse(_one_field("proto3", "int32 f = 1;"), ())
    reader = _parse(_one_field("proto3", "string f = 1;"), ())
    (problem,) = PROTOBUF.reader_errors(reader, writer)
    assert pb.format_problem(problem, "new", "old") == (
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
        "path '#/M/1' in the new schema does not match its kind in the old schema\"}"
    )


def test_package_change_is_reported_at_the_root() -> None:
    writer = _parse('syntax = "proto3";\npackage a;\nmessage M {\n  int32 f = 1;\n}\n', ())
    reader = _parse('syntax = "proto3";\npackage b;\nmessage M {\n  int32 f = 1;\n}\n', ())
    (problem,) = PROTOBUF.reader_errors(reader, writer)
    assert problem.error_type == "PACKAGE_CHANGED"
    assert "'#/'" in problem.description


# -- parsing and rendering

FULL = """\
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

option java_package = "com.example.shop";

message Order {
  reserved 7, 9 to 11, 20 to max;
  reserved "legacy";

  string id = 1 [json_name = "orderId"];
  repeated .shop.v1.Order.Line lines = 2;
  map<string, .shop.v1.Order.Line> by_sku = 3;
  optional int64 discount = 4 [deprecated = true];
  .shop.v1.Status status = 5;
  .google.protobuf.Timestamp placed_at = 6;

  oneof payment {
    string card = 12;
    bytes voucher = 13;
  }

  message Line {
    string sku = 1;
    uint32 quantity = 2;
  }
  enum Priority {
    option allow_alias = true;
    LOW = 0;
    NORMAL = 1;
    DEFAULT = 1;
  }
}
enum Status {
  UNKNOWN = 0;
  PLACED = 1;
}

service Orders {
  rpc Place (.shop.v1.Order) returns (.shop.v1.Order);
  rpc Watch (.shop.v1.Order) returns (stream .shop.v1.Order);
}
"""


def test_canonical_text_round_trips() -> None:
    schema = _parse(FULL, ())
    assert schema.canonical() == FULL
    assert _parse(schema.canonical(), ()).canonical() == FULL


def test_relative_names_are_written_fully_qualified() -> None:
    text = """\
syntax = "proto3";
package shop.v1;
message Order { Line line = 1; message Line { string sku = 1; } Status status = 2; }
enum Status { UNKNOWN = 0; }
"""
    canonical = _parse(text, ()).canonical()
    assert "  .shop.v1.Order.Line line = 1;\n" in canonical
    assert "  .shop.v1.Status status = 2;\n" in canonical


def test_base64_descriptor_in_and_out() -> None:
    schema = _parse(FULL, ())
    encoded = schema.formatted("serialized")
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(encoded))
    assert list(descriptor.dependency) == ["google/protobuf/timestamp.proto"]
    assert [m.name for m in descriptor.message_type] == ["Order"]
    again = _parse(encoded, ())
    assert again.canonical() == FULL
    assert again.formatted("serialized") == encoded
    assert schema.formatted(None) == FULL
    assert schema.formatted("ignore_extensions") == FULL  # other formats answer the text


def test_normalized_form() -> None:
    text = """\
syntax = "proto2";
package p;
import "b.proto";
import "a.proto";
option optimize_for = SPEED;
option java_package = "x";
message M {
  reserved 20 to 30, 2;
  reserved "z", "a";
  optional string second = 2 [json_name = "s", deprecated = true];
  optional int32 first = 1;
  oneof late { int32 y = 9; int32 x = 8; }
  oneof early { int32 w = 5; }
}
enum E { B = 1; A = 0; C = 1; }
"""
    imports = (
        ("a.proto", 'syntax = "proto3";\npackage a;\n'),
        ("b.proto", 'syntax = "proto3";\npackage b;\n'),
    )
    normalized = _parse(text, imports).normalized()
    assert (
        normalized.canonical()
        == """\
package p;

import "a.proto";
import "b.proto";

option java_package = "x";
option optimize_for = SPEED;

message M {
  reserved 2;
  reserved 20 to 30;
  reserved "a";
  reserved "z";

  optional int32 first = 1;
  optional string second = 2 [
    deprecated = true,
    json_name = "s"
  ];

  oneof early {
    int32 w = 5;
  }
  oneof late {
    int32 x = 8;
    int32 y = 9;
  }
}
enum E {
  A = 0;
  B = 1;
  C = 1;
}
"""
    )
    assert normalized.normalized() is normalized
    assert _parse(normalized.canonical(), imports).normalized().canonical() == (
        normalized.canonical()
    )
    # Semantically equal schemas written differently normalize alike.
    reordered = text.replace(
        'optional string second = 2 [json_name = "s", deprecated = true];\n'
        "  optional int32 first = 1;",
        "optional int32 first = 1;\n"
        '  optional string second = 2 [deprecated = true, json_name = "s"];',
    )
    assert reordered != text
    assert _parse(reordered, imports).normalized().canonical() == normalized.canonical()


def test_imports_resolve_through_references() -> None:
    common = 'syntax = "proto3";\npackage common;\nmessage Money {\n  int64 cents = 1;\n}\n'
    text = (
        'syntax = "proto3";\nimport "common/money.proto";\n'
        "message Price {\n  common.Money amount = 1;\n}\n"
    )
    schema = _parse(text, (("common/money.proto", common),))
    assert "  .common.Money amount = 1;\n" in schema.canonical()
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(schema.formatted("serialized"))
    )
    assert list(descriptor.dependency) == ["common/money.proto"]
    with pytest.raises(InvalidSchema, match=r"common/money\.proto"):
        _parse(text, ())


def test_well_known_imports_need_no_reference() -> None:
    text = """\
syntax = "proto3";
import "google/protobuf/wrappers.proto";
import "google/type/money.proto";
import "confluent/meta.proto";
message M {
  google.protobuf.StringValue name = 1 [(confluent.field_meta).doc = "a name"];
  google.type.Money price = 2;
}
"""
    schema = _parse(text, ())
    assert '  .google.protobuf.StringValue name = 1 [(confluent.field_meta).doc = "a name"];\n' in (
        schema.canonical()
    )
    assert _parse(schema.canonical(), ()).canonical() == schema.canonical()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("message { int32 = 1 }", "line 1"),
        ('syntax = "proto3";\nmessage A {\n  Missing f = 1;\n}\n', "Missing"),
        ('syntax = "proto3";\nmessage A {\n  int32 f = 1;\n  int32 g = 1;\n}\n', "number"),
        ('syntax = "proto3";\nmessage A {\n  required int32 f = 1;\n}\n', "required"),
        ('syntax = "proto4";\nmessage A {}\n', "proto4"),
        ('syntax = "proto3";\nimport "nowhere.proto";\nmessage A {}\n', "nowhere.proto"),
        ('syntax = "proto3";\nmessage A {\n  option no_such_option = true;\n}\n', "no_such"),
        ('syntax = "proto3";\nmessage A {}\nmessage A {}\n', "already defined"),
    ],
)
def test_invalid_schemas_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        PROTOBUF.parse(text, [])


def test_text_beyond_the_limit_is_refused_before_parsing() -> None:
    text = 'syntax = "proto3";\nmessage A {}\n' + "// padding\n" * (pb.MAX_TEXT_CHARS // 11)
    with pytest.raises(InvalidSchema, match="longer than"):
        PROTOBUF.parse(text, [])


def test_deep_nesting_is_refused_not_crashed() -> None:
    deep = 'syntax = "proto3";\n' + "message A { " * 400 + "}" * 400
    with pytest.raises(InvalidSchema):
        PROTOBUF.parse(deep, [])


def test_invalid_reference_names_the_reference() -> None:
    with pytest.raises(InvalidSchema, match=r"bad\.proto"):
        PROTOBUF.parse('syntax = "proto3";\nmessage A {}\n', [("bad.proto", "message {")])


# -- what confluent-kafka's serializer registers, and what its deserializer reads back


def _generated_message_class() -> type:
    """A message class as protoc would generate it, built from a descriptor."""
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    file.dependency.append("google/protobuf/timestamp.proto")
    order = file.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    order.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="id")
    order.field.add(
        name="quantities",
        number=2,
        type=F.TYPE_INT32,
        label=F.LABEL_REPEATED,
        json_name="quantities",
    )
    order.field.add(
        name="placed_at",
        number=3,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
        json_name="placedAt",
    )
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import timestamp_pb2

    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_schema_registered_by_confluent_kafka_serializer() -> None:
    from confluent_kafka.schema_registry.common.protobuf import (
        _init_pool,
        _schema_to_str,
        _str_to_proto,
    )

    order_class = _generated_message_class()
    registered = _schema_to_str(order_class.DESCRIPTOR.file)
    schema = _parse(registered, ())
    assert (
        schema.canonical()
        == """\
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  repeated int32 quantities = 2;
  .google.protobuf.Timestamp placed_at = 3;
}
"""
    )
    assert _parse(schema.canonical(), ()).formatted("serialized") == schema.formatted("serialized")
    # The deserializer's path: ?format=serialized, named "default", into a fresh pool.
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("default", schema.formatted("serialized")))
    reader_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    sent = order_class(id="o-1", quantities=[1, 2])
    sent.placed_at.seconds = 1_700_000_000
    received = reader_class.FromString(sent.SerializeToString())
    assert (received.id, list(received.quantities), received.placed_at.seconds) == (
        "o-1",
        [1, 2],
        1_700_000_000,
    )


def test_confluent_field_tags_reach_the_deserializer() -> None:
    from confluent_kafka.schema_registry.common.protobuf import (
        _init_pool,
        _str_to_proto,
        get_inline_tags,
    )

    custom = (
        'syntax = "proto2";\npackage custom;\nimport "google/protobuf/descriptor.proto";\n'
        "extend google.protobuf.FieldOptions {\n  optional int32 level = 50000;\n}\n"
    )
    text = """\
syntax = "proto3";
import "confluent/meta.proto";
import "custom.proto";
message Person {
  option (confluent.message_meta) = { doc: "a person" };
  string name = 1 [(confluent.field_meta).tags = "PII", (custom.level) = 3];
  string email = 2 [(confluent.field_meta) = { doc: "where to write", tags: ["PII", "CONTACT"] }];
}
"""
    imports = (("custom.proto", custom),)
    schema = _parse(text, imports)
    canonical = schema.canonical()
    assert '    (confluent.field_meta).tags = "PII",\n    (custom.level) = 3\n' in canonical
    assert _parse(canonical, imports).canonical() == canonical
    assert _serialized(text, imports).canonical() == canonical
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("custom.proto", _parse(custom, ()).formatted("serialized")))
    pool.Add(_str_to_proto("default", schema.formatted("serialized")))
    person = pool.FindMessageTypeByName("Person")
    assert get_inline_tags(person.fields_by_name["name"]) == {"PII"}
    assert get_inline_tags(person.fields_by_name["email"]) == {"PII", "CONTACT"}


@pytest.mark.parametrize("path", sorted(pb._builtin_files()))
def test_well_known_files_round_trip(path: str) -> None:
    """Real descriptors (defaults, extension ranges, repeated and message options...) render
    to text that parses back to the same text."""
    encoded = base64.b64encode(pb._builtin_files()[path].SerializeToString()).decode()
    schema = _parse(encoded, ())
    again = _parse(schema.canonical(), ())
    assert again.canonical() == schema.canonical()
    normalized = schema.normalized().canonical()
    assert _parse(normalized, ()).normalized().canonical() == normalized
    assert all(d.compatible for d in pb.differences(schema, again))


PROTO2 = r"""syntax = "proto2";
package d;

option java_multiple_files = true;

message M {
  optional int32 a = 1 [default = -5];
  optional string b = 2 [default = "x\"y\n"];
  optional bytes c = 3 [default = "\001\377ab"];
  optional .d.M.E e = 4 [default = TWO];
  optional double f = 5 [default = -inf];
  repeated int32 i = 8 [packed = true];
  required .d.M.Flags flags = 9;

  extensions 100 to 199;
  extensions 500 to max;

  message Flags {
    optional bool flag = 1;
  }
  enum E {
    ONE = 1;
    TWO = 2;
  }
}

extend .d.M {
  optional int32 ext = 100;
}

service S {
  option deprecated = true;

  rpc Call (.d.M) returns (stream .d.M) {
    option idempotency_level = NO_SIDE_EFFECTS;
  };
}
"""


def test_proto2_defaults_extensions_and_services_round_trip() -> None:
    schema = _parse(PROTO2, ())
    assert schema.canonical() == PROTO2
    assert _parse(schema.formatted("serialized"), ()).canonical() == PROTO2
    message = schema.file.message_type[0]
    assert message.field[2].default_value == "\\001\\377ab"  # bytes stay C-escaped
    assert message.field[1].default_value == 'x"y\n'
    # proto2 files lose their syntax line when normalized, as in Confluent's normalize.
    assert not schema.normalized().canonical().startswith("syntax")
