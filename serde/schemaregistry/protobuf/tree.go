package protobuf

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// messageTree is the nesting of the messages of a .proto source, enough to
// name the message a message-index array points at.
type messageTree struct {
	top []*messageNode
}

type messageNode struct {
	name     protoreflect.FullName
	children []*messageNode
}

// lookup returns the full name of the message at indexes.
func (t *messageTree) lookup(indexes []int) (protoreflect.FullName, bool) {
	level := t.top
	var n *messageNode
	for _, i := range indexes {
		if i < 0 || i >= len(level) {
			return "", false
		}
		n = level[i]
		level = n.children
	}
	if n == nil {
		return "", false
	}
	return n.name, true
}

// parseMessageTree reads the package and the message declarations of a
// .proto source, skipping comments, strings and every other construct. It
// never fails: a source it cannot follow gives a tree with fewer messages,
// so that a lookup fails instead.
func parseMessageTree(src string) *messageTree {
	toks := tokenize(src)
	t := &messageTree{}
	pkg := ""
	type frame struct{ msg *messageNode } // nil msg: another block
	var stack []frame
	for i := 0; i < len(toks); i++ {
		switch tok := toks[i]; {
		case tok == "package" && len(stack) == 0 && i+1 < len(toks):
			pkg = toks[i+1]
			i++
		case tok == "message" && i+2 < len(toks) && toks[i+2] == "{" && isIdent(toks[i+1]):
			name := toks[i+1]
			var parent *messageNode
			full := pkg
			for _, f := range stack {
				if f.msg != nil {
					parent = f.msg
				}
			}
			if parent != nil {
				full = string(parent.name)
			}
			if full != "" {
				full += "."
			}
			n := &messageNode{name: protoreflect.FullName(full + name)}
			if parent != nil {
				parent.children = append(parent.children, n)
			} else {
				t.top = append(t.top, n)
			}
			stack = append(stack, frame{n})
			i += 2
		case tok == "{":
			stack = append(stack, frame{})
		case tok == "}":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	return t
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// tokenize splits .proto source into identifiers (dotted names included),
// numbers and single punctuation characters; comments, white space and
// string literals are dropped.
func tokenize(src string) []string {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			i += 2
			for i+1 < len(src) && !(src[i] == '*' && src[i+1] == '/') {
				i++
			}
			i += 2
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case isIdent(src[i:i+1]) || (c >= '0' && c <= '9') || c == '.':
			j := i
			for j < len(src) && (isIdent(src[j:j+1]) || (src[j] >= '0' && src[j] <= '9') || src[j] == '.') {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		default:
			toks = append(toks, src[i:i+1])
			i++
		}
	}
	return toks
}
