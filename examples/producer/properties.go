package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/samsa-go/samsa/producer"
)

// propertiesFile is a -properties file: its keys, and the producer Config
// they make (producer.ConfigFromProperties). Every producer key of it is
// used; a flag given on the command line wins over the file.
type propertiesFile struct {
	name string            // the file's base name, for the summary
	keys map[string]string // as read; values are never printed
	cfg  producer.Config
}

func loadPropertiesFile(path string) (*propertiesFile, error) {
	props, err := producer.LoadProperties(path)
	if err != nil {
		return nil, err
	}
	cfg, err := producer.ConfigFromProperties(props)
	if err != nil {
		return nil, err
	}
	return &propertiesFile{name: filepath.Base(path), keys: props, cfg: cfg}, nil
}

// has reports whether the file sets one of keys; a nil file sets none.
func (f *propertiesFile) has(keys ...string) bool {
	if f == nil {
		return false
	}
	for _, k := range keys {
		if _, ok := f.keys[k]; ok {
			return true
		}
	}
	return false
}

// setting is one of the example's settings in the summary, with where its
// value came from: "flag -linger", "from FILE" or "default".
type setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// settingKeys are the property keys behind each setting the example has a
// flag for: those keys are reported with their setting, the file's other
// keys as "also from FILE".
var settingKeys = map[string][]string{
	"brokers":          {"bootstrap.servers", "metadata.broker.list"},
	"compression":      {"compression.type", "compression.codec"},
	"acks":             {"acks", "request.required.acks"},
	"linger":           {"linger.ms", "queue.buffering.max.ms"},
	"batch-size":       {"batch.size"},
	"idempotent":       {"enable.idempotence"},
	"transactional-id": {"transactional.id"},
}

// sources says where each setting comes from: an explicit flag (set), the
// file, or the flag's default.
type sources struct {
	set  map[string]bool // flags given on the command line
	file *propertiesFile
}

const (
	fromFlag = iota
	fromFile
	fromDefault
)

// of returns where the setting of flag name comes from, given the property
// keys that also set it.
func (s sources) of(name string, keys ...string) int {
	switch {
	case s.set[name]:
		return fromFlag
	case s.file.has(keys...):
		return fromFile
	}
	return fromDefault
}

// describe is how the summary names a source.
func (s sources) describe(from int, flagName string) string {
	switch from {
	case fromFlag:
		return "flag -" + flagName
	case fromFile:
		return "from " + s.file.name
	}
	return "default"
}

// otherKeys are the file's keys that no flag-backed setting reports and
// that the producer uses (not ignored), sorted: the file's other settings.
func (f *propertiesFile) otherKeys() []string {
	if f == nil {
		return nil
	}
	ignored := f.cfg.IgnoredProperties()
	var out []string
	for k := range f.keys {
		backed := false
		for _, ks := range settingKeys {
			backed = backed || slices.Contains(ks, k)
		}
		if !backed && !slices.Contains(ignored, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// settingValue renders a setting's value for the summary.
func settingValue(v any) string {
	switch v := v.(type) {
	case []string:
		if len(v) == 0 {
			return "the embedded cluster"
		}
		return strings.Join(v, ",")
	case string:
		if v == "" {
			return "none"
		}
		return v
	}
	return fmt.Sprint(v)
}
