package protobuf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	// The options of a file's descriptor are built lazily, as
	// descriptorpb messages: this import makes sure they can be.
	_ "google.golang.org/protobuf/types/descriptorpb"
)

// Render returns the .proto source of fd, as a registry stores a Protobuf
// schema: syntax, package, imports, options, messages (nested ones, enums,
// oneofs, maps, proto3 optional fields, reserved ranges and names,
// extension ranges, extensions), enums and services; comments are not
// kept. Options set in the descriptor are written, custom ones (known
// extensions of the options messages) as (full.name) = value. Type names
// are written relative to fd's package when inside it, else in full.
// proto2 groups and editions files are not supported.
func Render(fd protoreflect.FileDescriptor) (string, error) {
	r := &renderer{pkg: string(fd.Package())}
	if err := r.file(fd); err != nil {
		return "", fmt.Errorf("protobuf: rendering %s: %w", fd.Path(), err)
	}
	return r.b.String(), nil
}

type renderer struct {
	b      strings.Builder
	pkg    string
	syntax protoreflect.Syntax
}

func (r *renderer) line(depth int, format string, args ...any) {
	for range depth {
		r.b.WriteString("  ")
	}
	fmt.Fprintf(&r.b, format, args...)
	r.b.WriteByte('\n')
}

func (r *renderer) file(fd protoreflect.FileDescriptor) error {
	r.syntax = fd.Syntax()
	switch r.syntax {
	case protoreflect.Proto2:
		r.line(0, `syntax = "proto2";`)
	case protoreflect.Proto3:
		r.line(0, `syntax = "proto3";`)
	default:
		return fmt.Errorf("syntax %v is not supported (proto2 and proto3 are)", r.syntax)
	}
	if r.pkg != "" {
		r.line(0, "package %s;", r.pkg)
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		imp := imports.Get(i)
		kind := ""
		switch {
		case imp.IsPublic:
			kind = "public "
		case imp.IsWeak:
			kind = "weak "
		}
		r.line(0, "import %s%s;", kind, quote(imp.Path()))
	}
	r.options(0, fd.Options())
	msgs := fd.Messages()
	for i := range msgs.Len() {
		if err := r.message(0, msgs.Get(i)); err != nil {
			return err
		}
	}
	enums := fd.Enums()
	for i := range enums.Len() {
		r.enum(0, enums.Get(i))
	}
	if err := r.extensions(0, fd.Extensions()); err != nil {
		return err
	}
	svcs := fd.Services()
	for i := range svcs.Len() {
		r.service(svcs.Get(i))
	}
	return nil
}

func (r *renderer) message(depth int, md protoreflect.MessageDescriptor) error {
	if md.IsMapEntry() {
		return nil // written as map<K, V> by its field
	}
	r.line(depth, "message %s {", md.Name())
	in := depth + 1
	r.options(in, md.Options())
	r.reserved(in, md.ReservedRanges(), md.ReservedNames(), true)
	fields := md.Fields()
	done := map[protoreflect.OneofDescriptor]bool{}
	for i := range fields.Len() {
		f := fields.Get(i)
		if oo := f.ContainingOneof(); oo != nil && !oo.IsSynthetic() {
			if done[oo] {
				continue
			}
			done[oo] = true
			r.line(in, "oneof %s {", oo.Name())
			r.options(in+1, oo.Options())
			ofs := oo.Fields()
			for j := range ofs.Len() {
				if err := r.field(in+1, ofs.Get(j), true); err != nil {
					return err
				}
			}
			r.line(in, "}")
			continue
		}
		if err := r.field(in, f, false); err != nil {
			return err
		}
	}
	nested := md.Messages()
	for i := range nested.Len() {
		if err := r.message(in, nested.Get(i)); err != nil {
			return err
		}
	}
	enums := md.Enums()
	for i := range enums.Len() {
		r.enum(in, enums.Get(i))
	}
	if xr := md.ExtensionRanges(); xr.Len() > 0 {
		var parts []string
		for i := range xr.Len() {
			rg := xr.Get(i)
			parts = append(parts, rangeText(int64(rg[0]), int64(rg[1])-1, true))
		}
		r.line(in, "extensions %s;", strings.Join(parts, ", "))
	}
	if err := r.extensions(in, md.Extensions()); err != nil {
		return err
	}
	r.line(depth, "}")
	return nil
}

// options writes an option line for each option set in opts.
func (r *renderer) options(depth int, opts proto.Message) {
	for _, o := range options(opts) {
		r.line(depth, "option %s;", o)
	}
}

// extensions writes extend blocks, one per extendee, in declaration
// order.
func (r *renderer) extensions(depth int, xs protoreflect.ExtensionDescriptors) error {
	var order []protoreflect.MessageDescriptor
	by := map[protoreflect.FullName][]protoreflect.FieldDescriptor{}
	for i := range xs.Len() {
		x := xs.Get(i)
		name := x.ContainingMessage().FullName()
		if _, ok := by[name]; !ok {
			order = append(order, x.ContainingMessage())
		}
		by[name] = append(by[name], x)
	}
	for _, md := range order {
		name := md.FullName()
		r.line(depth, "extend %s {", r.typeName(md))
		for _, x := range by[name] {
			if err := r.field(depth+1, x, false); err != nil {
				return err
			}
		}
		r.line(depth, "}")
	}
	return nil
}

func (r *renderer) field(depth int, f protoreflect.FieldDescriptor, inOneof bool) error {
	if f.Kind() == protoreflect.GroupKind {
		return fmt.Errorf("field %s: proto2 groups are not supported", f.FullName())
	}
	var typ string
	label := ""
	switch {
	case f.IsMap():
		typ = fmt.Sprintf("map<%s, %s>", r.fieldType(f.MapKey()), r.fieldType(f.MapValue()))
	case f.Cardinality() == protoreflect.Repeated:
		label, typ = "repeated ", r.fieldType(f)
	default:
		typ = r.fieldType(f)
		switch {
		case inOneof:
		case f.Cardinality() == protoreflect.Required:
			label = "required "
		case r.syntax == protoreflect.Proto2 || f.HasOptionalKeyword():
			label = "optional "
		}
	}
	var opts []string
	if f.HasDefault() {
		opts = append(opts, "default = "+defaultText(f))
	}
	if f.HasJSONName() && f.JSONName() != jsonName(string(f.Name())) {
		opts = append(opts, "json_name = "+quote(f.JSONName()))
	}
	opts = append(opts, options(f.Options())...)
	suffix := ""
	if len(opts) > 0 {
		suffix = " [" + strings.Join(opts, ", ") + "]"
	}
	r.line(depth, "%s%s %s = %d%s;", label, typ, f.Name(), f.Number(), suffix)
	return nil
}

func (r *renderer) fieldType(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return r.typeName(f.Message())
	case protoreflect.EnumKind:
		return r.typeName(f.Enum())
	default:
		return f.Kind().String() // "int32", "string", "sfixed64"...
	}
}

// typeName names d relative to the file's package when d is declared in
// that package, in full otherwise.
func (r *renderer) typeName(d protoreflect.Descriptor) string {
	name := string(d.FullName())
	if r.pkg != "" && string(d.ParentFile().Package()) == r.pkg {
		return strings.TrimPrefix(name, r.pkg+".")
	}
	return name
}

func (r *renderer) enum(depth int, ed protoreflect.EnumDescriptor) {
	r.line(depth, "enum %s {", ed.Name())
	in := depth + 1
	r.options(in, ed.Options())
	r.reserved(in, ed.ReservedRanges(), ed.ReservedNames(), false)
	vals := ed.Values()
	for i := range vals.Len() {
		v := vals.Get(i)
		suffix := ""
		if opts := options(v.Options()); len(opts) > 0 {
			suffix = " [" + strings.Join(opts, ", ") + "]"
		}
		r.line(in, "%s = %d%s;", v.Name(), v.Number(), suffix)
	}
	r.line(depth, "}")
}

// ranges is what message and enum reserved ranges have in common.
type ranges interface {
	Len() int
}

func (r *renderer) reserved(depth int, rs ranges, names protoreflect.Names, message bool) {
	var parts []string
	for i := range rs.Len() {
		if message {
			rg := rs.(protoreflect.FieldRanges).Get(i)
			parts = append(parts, rangeText(int64(rg[0]), int64(rg[1])-1, true))
		} else {
			rg := rs.(protoreflect.EnumRanges).Get(i)
			parts = append(parts, rangeText(int64(rg[0]), int64(rg[1]), false))
		}
	}
	if len(parts) > 0 {
		r.line(depth, "reserved %s;", strings.Join(parts, ", "))
	}
	parts = parts[:0]
	for i := range names.Len() {
		parts = append(parts, quote(string(names.Get(i))))
	}
	if len(parts) > 0 {
		r.line(depth, "reserved %s;", strings.Join(parts, ", "))
	}
}

// rangeText writes an inclusive range; a field range ending at the
// largest field number, or an enum range at the largest int32, ends with
// "max".
func rangeText(lo, hi int64, field bool) string {
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	end := strconv.FormatInt(hi, 10)
	if (field && hi == 536870911) || (!field && hi == math.MaxInt32) {
		end = "max"
	}
	return strconv.FormatInt(lo, 10) + " to " + end
}

func (r *renderer) service(sd protoreflect.ServiceDescriptor) {
	r.line(0, "service %s {", sd.Name())
	r.options(1, sd.Options())
	ms := sd.Methods()
	for i := range ms.Len() {
		m := ms.Get(i)
		in, out := r.typeName(m.Input()), r.typeName(m.Output())
		if m.IsStreamingClient() {
			in = "stream " + in
		}
		if m.IsStreamingServer() {
			out = "stream " + out
		}
		opts := options(m.Options())
		if len(opts) == 0 {
			r.line(1, "rpc %s(%s) returns (%s);", m.Name(), in, out)
			continue
		}
		r.line(1, "rpc %s(%s) returns (%s) {", m.Name(), in, out)
		for _, o := range opts {
			r.line(2, "option %s;", o)
		}
		r.line(1, "}")
	}
	r.line(0, "}")
}

// options returns "name = value" for every option set in opts (a
// descriptorpb options message), by field number; custom options known to
// the options message (linked extensions) as "(full.name) = value".
// Unknown custom options are left out.
func options(opts proto.Message) []string {
	if opts == nil {
		return nil
	}
	m := opts.ProtoReflect()
	if !m.IsValid() {
		return nil
	}
	type set struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var all []set
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		// uninterpreted_option (999) is the compiler's scratch space;
		// features belong to editions.
		if !fd.IsExtension() && (fd.Number() == 999 || fd.Name() == "features") {
			return true
		}
		all = append(all, set{fd, v})
		return true
	})
	slices.SortFunc(all, func(a, b set) int { return int(a.fd.Number()) - int(b.fd.Number()) })
	var out []string
	for _, s := range all {
		name := string(s.fd.Name())
		if s.fd.IsExtension() {
			name = "(" + string(s.fd.FullName()) + ")"
		}
		if s.fd.IsList() {
			l := s.v.List()
			for i := range l.Len() {
				out = append(out, name+" = "+valueText(s.fd, l.Get(i)))
			}
			continue
		}
		out = append(out, name+" = "+valueText(s.fd, s.v))
	}
	return out
}

// valueText writes an option's value as .proto source does.
func valueText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.StringKind:
		return quote(v.String())
	case protoreflect.BytesKind:
		return quote(string(v.Bytes()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return floatText(v.Float())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return aggregateText(v.Message())
	default:
		return v.String()
	}
}

// aggregateText writes a message-valued option in the text format, the
// same on every run (prototext's output varies on purpose): fields by
// number, "name: value" separated by spaces.
func aggregateText(m protoreflect.Message) string {
	type set struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var all []set
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		all = append(all, set{fd, v})
		return true
	})
	slices.SortFunc(all, func(a, b set) int { return int(a.fd.Number()) - int(b.fd.Number()) })
	parts := []string{"{"}
	for _, s := range all {
		name := string(s.fd.Name())
		if s.fd.IsExtension() {
			name = "[" + string(s.fd.FullName()) + "]"
		}
		switch {
		case s.fd.IsList():
			l := s.v.List()
			for i := range l.Len() {
				parts = append(parts, name+": "+valueText(s.fd, l.Get(i)))
			}
		case s.fd.IsMap():
			// Map-valued options are rare; their entries are skipped.
		default:
			parts = append(parts, name+": "+valueText(s.fd, s.v))
		}
	}
	return strings.Join(append(parts, "}"), " ")
}

func floatText(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// defaultText writes a proto2 field's default value.
func defaultText(f protoreflect.FieldDescriptor) string {
	v := f.Default()
	switch f.Kind() {
	case protoreflect.EnumKind:
		return string(f.DefaultEnumValue().Name())
	case protoreflect.StringKind:
		return quote(v.String())
	case protoreflect.BytesKind:
		return quote(string(v.Bytes()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return floatText(v.Float())
	default:
		return v.String()
	}
}

// jsonName is protoc's default JSON name of a field: its name with each
// underscore dropped and the letter after it upper-cased.
func jsonName(name string) string {
	var b strings.Builder
	up := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// quote writes s as a .proto string literal: printable ASCII as is, the
// usual escapes, every other byte in octal (valid in every parser).
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\%03o`, c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
