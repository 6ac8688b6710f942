// Command gen writes the Go code of the test .proto files (described
// below as descriptors, since no protoc is needed) with protoc-gen-go's
// own generator:
//
//	go run ./internal/testpb/gen -out internal/testpb -package github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb
//
// The files: testpb/common.proto (Money, Status) and testpb/order.proto
// (Order, with every kind of field and an import; Flat, ten scalar
// fields, the benchmarks' shape; Envelope, nested three deep).
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/pluginpb"
)

type fdp = descriptorpb.FieldDescriptorProto

func field(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *fdp {
	f := &fdp{
		Name:     proto.String(name),
		Number:   proto.Int32(num),
		Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		Type:     typ.Enum(),
		JsonName: proto.String(jsonName(name)),
	}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func jsonName(s string) string {
	out := []byte{}
	up := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			out = append(out, c-32)
			up = false
		default:
			out = append(out, c)
			up = false
		}
	}
	return string(out)
}

func repeated(f *fdp) *fdp {
	f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	return f
}

func inOneof(f *fdp, i int32) *fdp {
	f.OneofIndex = proto.Int32(i)
	return f
}

const (
	tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tDouble  = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tFloat   = descriptorpb.FieldDescriptorProto_TYPE_FLOAT
	tBool    = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tBytes   = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
)

func files(goPackage string) []*descriptorpb.FileDescriptorProto {
	opts := &descriptorpb.FileOptions{GoPackage: proto.String(goPackage), JavaPackage: proto.String("io.samsa.test")}
	common := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("testpb/common.proto"),
		Package: proto.String("samsa.test.common"),
		Syntax:  proto.String("proto3"),
		Options: opts,
		MessageType: []*descriptorpb.DescriptorProto{{
			Name:  proto.String("Money"),
			Field: []*fdp{field("cents", 1, tInt64, ""), field("currency", 2, tString, "")},
		}},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Status"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("STATUS_UNKNOWN"), Number: proto.Int32(0)},
				{Name: proto.String("STATUS_OPEN"), Number: proto.Int32(1)},
				{Name: proto.String("STATUS_PAID"), Number: proto.Int32(2)},
			},
		}},
	}
	note := field("note", 12, tString, "")
	note.Proto3Optional = proto.Bool(true)
	note.OneofIndex = proto.Int32(1)
	order := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("testpb/order.proto"),
		Package:    proto.String("samsa.test"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"testpb/common.proto", "google/protobuf/timestamp.proto"},
		Options:    opts,
		MessageType: []*descriptorpb.DescriptorProto{
			{
				Name: proto.String("Order"),
				Field: []*fdp{
					field("id", 1, tInt64, ""),
					field("customer", 2, tString, ""),
					field("amount", 3, tDouble, ""),
					field("paid", 4, tBool, ""),
					field("price", 5, tMessage, ".samsa.test.common.Money"),
					repeated(field("tags", 6, tString, "")),
					repeated(field("counts", 7, tMessage, ".samsa.test.Order.CountsEntry")),
					field("status", 8, tEnum, ".samsa.test.common.Status"),
					field("created", 9, tMessage, ".google.protobuf.Timestamp"),
					inOneof(field("card", 10, tString, ""), 0),
					inOneof(field("iban", 11, tString, ""), 0),
					note,
					repeated(field("lines", 13, tMessage, ".samsa.test.Order.Line")),
				},
				NestedType: []*descriptorpb.DescriptorProto{
					{
						Name:    proto.String("CountsEntry"),
						Field:   []*fdp{field("key", 1, tString, ""), field("value", 2, tInt32, "")},
						Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
					},
					{
						Name:  proto.String("Line"),
						Field: []*fdp{field("sku", 1, tString, ""), field("quantity", 2, tInt32, "")},
					},
				},
				OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String("payment")}, {Name: proto.String("_note")}},
				ReservedRange: []*descriptorpb.DescriptorProto_ReservedRange{
					{Start: proto.Int32(20), End: proto.Int32(21)},
					{Start: proto.Int32(30), End: proto.Int32(40)},
				},
				ReservedName: []string{"legacy"},
			},
			{
				Name: proto.String("Flat"),
				Field: []*fdp{
					field("id", 1, tInt64, ""),
					field("customer", 2, tString, ""),
					field("amount", 3, tDouble, ""),
					field("paid", 4, tBool, ""),
					field("quantity", 5, tInt32, ""),
					field("sku", 6, tString, ""),
					field("created_ms", 7, tInt64, ""),
					field("discount", 8, tFloat, ""),
					field("region", 9, tString, ""),
					field("token", 10, tBytes, ""),
				},
			},
			{
				Name: proto.String("Envelope"),
				NestedType: []*descriptorpb.DescriptorProto{{
					Name: proto.String("Inner"),
					NestedType: []*descriptorpb.DescriptorProto{{
						Name:  proto.String("Deep"),
						Field: []*fdp{field("text", 1, tString, "")},
					}},
				}},
			},
		},
	}
	return []*descriptorpb.FileDescriptorProto{common, order}
}

func main() {
	out := flag.String("out", "", "the directory to write the .pb.go files to")
	pkg := flag.String("package", "", "the Go import path of the generated package")
	flag.Parse()
	if *out == "" || *pkg == "" {
		log.Fatal("usage: gen -out DIR -package IMPORTPATH")
	}
	fds := files(*pkg)
	all := []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(timestamppb.File_google_protobuf_timestamp_proto)}
	all = append(all, fds...)
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{"testpb/common.proto", "testpb/order.proto"},
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      all,
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			internal_gengo.GenerateFile(gen, f)
		}
	}
	resp := gen.Response()
	if resp.Error != nil {
		log.Fatal(resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(*out, filepath.Base(f.GetName()))
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
