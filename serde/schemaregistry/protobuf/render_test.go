package protobuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/apipb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb"
)

const wantOrderProto = `syntax = "proto3";
package samsa.test;
import "testpb/common.proto";
import "google/protobuf/timestamp.proto";
option java_package = "io.samsa.test";
option go_package = "github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb";
message Order {
  reserved 20, 30 to 39;
  reserved "legacy";
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  bool paid = 4;
  samsa.test.common.Money price = 5;
  repeated string tags = 6;
  map<string, int32> counts = 7;
  samsa.test.common.Status status = 8;
  google.protobuf.Timestamp created = 9;
  oneof payment {
    string card = 10;
    string iban = 11;
  }
  optional string note = 12;
  repeated Order.Line lines = 13;
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
}
message Flat {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  bool paid = 4;
  int32 quantity = 5;
  string sku = 6;
  int64 created_ms = 7;
  float discount = 8;
  string region = 9;
  bytes token = 10;
}
message Envelope {
  message Inner {
    message Deep {
      string text = 1;
    }
  }
}
`

func TestRenderOrder(t *testing.T) {
	got, err := Render(testpb.File_testpb_order_proto)
	require.NoError(t, err)
	assert.Equal(t, wantOrderProto, got)
}

// TestRenderProto2 renders descriptor.proto: proto2 labels, defaults,
// enums with options, extension ranges, reserved ranges, nested types.
func TestRenderProto2(t *testing.T) {
	got, err := Render(descriptorpb.File_google_protobuf_descriptor_proto)
	require.NoError(t, err)
	for _, want := range []string{
		"syntax = \"proto2\";\npackage google.protobuf;\n",
		"option java_outer_classname = \"DescriptorProtos\";\n",
		"option optimize_for = SPEED;\n",
		"  optional string name = 1;\n",
		"  repeated DescriptorProto.ReservedRange reserved_range = 9;\n",
		"  extensions 990 to 998, 1000 to max;\n",
		"  optional bool java_string_check_utf8 = 27 [default = false];\n",
		// An aggregate option value, written the same on every run.
		"[retention = RETENTION_RUNTIME, targets = TARGET_TYPE_ENUM, targets = TARGET_TYPE_FILE, edition_defaults = { value: \"CLOSED\" edition: EDITION_LEGACY }, edition_defaults = { value: \"OPEN\" edition: EDITION_PROTO3 }, feature_support = { edition_introduced: EDITION_2023 }]",
		"  optional FileOptions.OptimizeMode optimize_for = 9 [default = SPEED];\n",
		"  optional bool deprecated = 23 [default = false];\n",
		"    LABEL_REPEATED = 3;\n",
		"  reserved 42, 38;\n",
	} {
		assert.Contains(t, got, want)
	}
}

func TestRenderServicesAndDependencies(t *testing.T) {
	got, err := Render(apipb.File_google_protobuf_api_proto)
	require.NoError(t, err)
	assert.Contains(t, got, "import \"google/protobuf/source_context.proto\";\n")
	assert.Contains(t, got, "  repeated Option options = 3;\n", "a type of another file of the same package: relative")
	got, err = Render(structpb.File_google_protobuf_struct_proto)
	require.NoError(t, err)
	assert.Contains(t, got, "  map<string, Value> fields = 1;\n")
	assert.Contains(t, got, "    NullValue null_value = 1;\n")
}

func TestMessageIndexes(t *testing.T) {
	cases := []struct {
		md   protoreflect.MessageDescriptor
		want []int
	}{
		{(&testpb.Order{}).ProtoReflect().Descriptor(), []int{0}},
		{(&testpb.Flat{}).ProtoReflect().Descriptor(), []int{1}},
		// Order's map entry (CountsEntry) comes first among its nested
		// messages, and is not counted: .proto source does not show it.
		{(&testpb.Order_Line{}).ProtoReflect().Descriptor(), []int{0, 0}},
		{(&testpb.Envelope_Inner_Deep{}).ProtoReflect().Descriptor(), []int{2, 0, 0}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, MessageIndexes(tc.md), string(tc.md.FullName()))
	}
}

// TestMessageTreeFindsEveryMessage: the tree parsed from a rendered file
// names each message at its MessageIndexes.
func TestMessageTreeFindsEveryMessage(t *testing.T) {
	for _, fd := range []protoreflect.FileDescriptor{testpb.File_testpb_order_proto, descriptorpb.File_google_protobuf_descriptor_proto, structpb.File_google_protobuf_struct_proto} {
		src, err := Render(fd)
		require.NoError(t, err)
		tree := parseMessageTree(src)
		var walk func(protoreflect.MessageDescriptors)
		walk = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				md := ms.Get(i)
				if md.IsMapEntry() {
					continue
				}
				got, ok := tree.lookup(MessageIndexes(md))
				assert.True(t, ok, string(md.FullName()))
				assert.Equal(t, md.FullName(), got)
				walk(md.Messages())
			}
		}
		walk(fd.Messages())
	}
}

func TestMessageTreeSkipsCommentsAndStrings(t *testing.T) {
	src := `// message Fake {
syntax = "proto3";
/* message Hidden { } */
package a.b;
message One { string message = 1; option (x) = { s: "message Nope {" }; }
enum E { X = 0; }
message Two {
  oneof o { string s = 1; }
  message Three { }
}`
	tree := parseMessageTree(src)
	for _, tc := range []struct {
		idx  []int
		want protoreflect.FullName
	}{{[]int{0}, "a.b.One"}, {[]int{1}, "a.b.Two"}, {[]int{1, 0}, "a.b.Two.Three"}} {
		got, ok := tree.lookup(tc.idx)
		assert.True(t, ok)
		assert.Equal(t, tc.want, got)
	}
	for _, idx := range [][]int{{2}, {0, 0}, {1, 1}, {}} {
		_, ok := tree.lookup(idx)
		assert.False(t, ok, "%v", idx)
	}
}

// FuzzParseMessageTree: any source parses without panicking, and every
// lookup of a short path stays in bounds.
func FuzzParseMessageTree(f *testing.F) {
	f.Add(wantOrderProto)
	f.Add("message A { message B { } } message C {")
	f.Add("/* unterminated")
	f.Add(`"unterminated`)
	f.Fuzz(func(t *testing.T, src string) {
		tree := parseMessageTree(src)
		for _, idx := range [][]int{{0}, {1}, {0, 0}, {0, 1, 2}} {
			tree.lookup(idx)
		}
	})
}
