package producer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Config providers (KIP-297; EnvVarConfigProvider: KIP-887): a value may
// hold placeholders ${provider:[path:]key} that ConfigFromProperties
// replaces, before it reads any key, with what the named provider gives,
// as Java's AbstractConfig and ConfigTransformer do. The keys:
//
//	config.providers                               the providers' names, comma-separated
//	config.providers.NAME.class                    one of Java's three classes (below)
//	config.providers.NAME.param.allowed.paths      FileConfigProvider, DirectoryConfigProvider:
//	                                               comma-separated absolute directories (KIP-993)
//	config.providers.NAME.param.allowlist.pattern  EnvVarConfigProvider: a regular expression
//	                                               that a variable's whole name must match
//
// The classes, and what ${NAME:path:key} is:
//
//	org.apache.kafka.common.config.provider.FileConfigProvider       the property key of the
//	                                                                 properties file at path
//	org.apache.kafka.common.config.provider.DirectoryConfigProvider  the content of the file
//	                                                                 named key in directory path
//	org.apache.kafka.common.config.provider.EnvVarConfigProvider     ${NAME:VAR}: the environment
//	                                                                 variable VAR (no path)
const (
	keyConfigProviders = "config.providers"

	fileProviderClass = "org.apache.kafka.common.config.provider.FileConfigProvider"
	dirProviderClass  = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
	envProviderClass  = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"

	// EnvAutomaticConfigProviders names the environment variable that
	// lists, comma-separated, the provider classes config.providers may
	// name: Java's JVM system property
	// org.apache.kafka.automatic.config.providers (Kafka 3.8+, the fix of
	// CVE-2024-31141), which a shell cannot spell as a variable name. The
	// rule is Java's: unset, every class may run; set, only the classes
	// it lists (names trimmed, compared exactly), so that "none", or an
	// empty value, lets none run and makes a file that configures a
	// provider an error. PropertiesOptions.AutomaticConfigProviders
	// replaces it.
	EnvAutomaticConfigProviders  = "SAMSA_AUTOMATIC_CONFIG_PROVIDERS"
	javaAutomaticConfigProviders = "org.apache.kafka.automatic.config.providers"

	// maxProviderFile bounds a file a provider reads (a properties file
	// or a directory's file), and maxResolvedValue a value once its
	// placeholders are replaced: 1 MiB, the longest line
	// ParseProperties reads. maxProviderRead bounds all the bytes the
	// providers read for one call, however many files the placeholders
	// name.
	maxProviderFile  = 1 << 20
	maxResolvedValue = 1 << 20
	maxProviderRead  = 16 << 20
)

// PropertiesOptions are options of ConfigFromPropertiesWith. The zero
// value is what ConfigFromProperties uses.
type PropertiesOptions struct {
	// AutomaticConfigProviders, when not nil, lists the config provider
	// classes (Java's names, as config.providers.NAME.class gives them)
	// that config.providers may configure, in place of the environment
	// variable EnvAutomaticConfigProviders: an empty slice, or
	// []string{"none"}, lets none run. Nil (the default) reads the
	// variable; unset, every provider may run, as in Java.
	AutomaticConfigProviders []string
}

// ConfigFromPropertiesWith is ConfigFromProperties with options: see
// PropertiesOptions.
func ConfigFromPropertiesWith(props map[string]string, opts PropertiesOptions) (Config, error) {
	return configFromProperties(props, opts)
}

// placeholder is ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key},
// matched leftmost-first as Java's regular expressions do (the provider
// ends at the first ':', the path at the next, the key takes the rest).
var placeholder = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// resolvedProps is what resolveConfigProviders returns.
type resolvedProps struct {
	props map[string]string // the properties, placeholders replaced, without config.providers*
	// from maps each key whose value a provider filled to that provider's
	// name: its errors print no value.
	from    map[string]string
	ignored []string // config.providers.NAME.* of a NAME not listed
	bad     []string // problems, as ConfigFromProperties lists them
}

// configProvider is one configured provider. get returns the value of key
// at path, or an error whose text names neither a value nor the file's
// content.
type configProvider interface {
	get(path, key string) (string, error)
}

// resolveConfigProviders configures the providers that props name and
// replaces every placeholder of the other values. Java leaves a
// placeholder it cannot resolve (unknown provider, missing key, path not
// allowed) in the value, which then fails later or, worse, becomes the
// password; here each is an error naming the property key and the
// provider, never the value. Values are replaced once: a placeholder in
// a provider's answer stays as it is, as in Java.
func resolveConfigProviders(props map[string]string, opts PropertiesOptions) resolvedProps {
	var providerKeys []string
	placeholders := false
	for k, v := range props {
		if k == keyConfigProviders || strings.HasPrefix(k, keyConfigProviders+".") {
			providerKeys = append(providerKeys, k)
		}
		placeholders = placeholders || strings.Contains(v, "${")
	}
	if providerKeys == nil && !placeholders {
		return resolvedProps{props: props} // nothing to do: no copy
	}
	r := resolvedProps{props: make(map[string]string, len(props))}
	for k, v := range props {
		if k != keyConfigProviders && !strings.HasPrefix(k, keyConfigProviders+".") {
			r.props[k] = v
		}
	}
	slices.Sort(providerKeys)
	bad := func(key, format string, args ...any) {
		for i, a := range args {
			if v, ok := a.(string); ok {
				args[i] = untrusted(v)
			}
		}
		r.bad = append(r.bad, key+": "+fmt.Sprintf(format, args...))
	}

	// The providers that config.providers names.
	var names []string
	for n := range strings.SplitSeq(props[keyConfigProviders], ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	allowed, allowedFrom := automaticProviders(opts)
	budget := int64(maxProviderRead)
	providers := map[string]configProvider{}
	for _, name := range names {
		prefix := keyConfigProviders + "." + name + "."
		classKey := prefix + "class"
		class, ok := props[classKey]
		class = strings.TrimSpace(class)
		if !ok || class == "" {
			bad(classKey, "not set, for config provider %q of config.providers", name)
			continue
		}
		if allowed != nil && !allowed[class] {
			bad(classKey, "%q is not allowed: %s lists the provider classes that may run (Java: the system property %s)", class, allowedFrom, javaAutomaticConfigProviders)
			continue
		}
		params := map[string]string{}
		for _, k := range providerKeys {
			if p, ok := strings.CutPrefix(k, prefix+"param."); ok {
				params[p] = strings.TrimSpace(props[k])
			}
		}
		var want []string
		switch class {
		case fileProviderClass, dirProviderClass:
			want = []string{"allowed.paths"}
		case envProviderClass:
			want = []string{"allowlist.pattern"}
		default:
			bad(classKey, "%q cannot be loaded in Go: use %s, %s or %s", class, fileProviderClass, dirProviderClass, envProviderClass)
			continue
		}
		ok = true
		for p := range params {
			if !slices.Contains(want, p) {
				bad(prefix+"param."+p, "is not a parameter of %s (it takes %s)", untrusted(class[strings.LastIndexByte(class, '.')+1:]), strings.Join(want, ", "))
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch class {
		case fileProviderClass, dirProviderClass:
			ap, err := parseAllowedPaths(params["allowed.paths"])
			if err != nil {
				bad(prefix+"param.allowed.paths", "%v", err)
				continue
			}
			if class == fileProviderClass {
				providers[name] = &fileProvider{allowed: ap, budget: &budget, files: map[string]map[string]string{}}
			} else {
				providers[name] = &dirProvider{allowed: ap, budget: &budget}
			}
		case envProviderClass:
			ep := &envProvider{}
			if p, set := params["allowlist.pattern"]; set {
				// Java's Matcher.matches: the whole name.
				re, err := regexp.Compile(`^(?:` + p + `)$`)
				if err != nil {
					bad(prefix+"param.allowlist.pattern", "%q is not a regular expression Go reads (RE2 syntax)", p)
					continue
				}
				ep.allow = re
			}
			providers[name] = ep
		}
	}
	// The other config.providers.* keys: those of a listed provider must
	// be its class or a param; those of a provider not listed configure
	// nothing (Java ignores them too) and are reported as ignored.
	for _, k := range providerKeys {
		if k == keyConfigProviders {
			continue
		}
		owner := ""
		for _, n := range names {
			if strings.HasPrefix(k, keyConfigProviders+"."+n+".") && len(n) > len(owner) {
				owner = n
			}
		}
		if owner == "" {
			r.ignored = append(r.ignored, k)
			continue
		}
		rest := strings.TrimPrefix(k, keyConfigProviders+"."+owner+".")
		if rest != "class" && !strings.HasPrefix(rest, "param.") {
			bad(k, "is not a key of a config provider (config.providers.%s.class or config.providers.%s.param.NAME)", untrusted(owner), untrusted(owner))
		}
	}
	if len(r.bad) > 0 {
		return r
	}

	// Replace the placeholders, key by key in order.
	keys := make([]string, 0, len(r.props))
	for k := range r.props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v := r.props[key]
		if !strings.Contains(v, "${") {
			continue
		}
		matches := placeholder.FindAllStringSubmatchIndex(v, -1)
		if matches == nil {
			continue
		}
		var b strings.Builder
		last, failed := 0, false
		for _, m := range matches {
			name := v[m[2]:m[3]]
			path, k := "", v[m[8]:m[9]]
			if m[6] >= 0 {
				path = v[m[6]:m[7]]
			}
			p, ok := providers[name]
			if !ok {
				if len(names) == 0 {
					bad(key, "names config provider %q, but config.providers is not set", name)
				} else {
					bad(key, "names config provider %q, which config.providers (%q) does not list", name, strings.Join(names, ","))
				}
				failed = true
				break
			}
			val, err := p.get(path, k)
			if err != nil {
				bad(key, "config provider %q: %v", name, err)
				failed = true
				break
			}
			b.WriteString(v[last:m[0]])
			b.WriteString(val)
			last = m[1]
			if b.Len() > maxResolvedValue {
				bad(key, "is longer than 1 MiB once config provider %q filled it in", name)
				failed = true
				break
			}
		}
		if failed {
			continue
		}
		b.WriteString(v[last:])
		if b.Len() > maxResolvedValue {
			bad(key, "is longer than 1 MiB once its config providers filled it in")
			continue
		}
		r.props[key] = b.String()
		if r.from == nil {
			r.from = map[string]string{}
		}
		r.from[key] = v[matches[0][2]:matches[0][3]]
	}
	return r
}

// automaticProviders returns the provider classes that may run (nil: all)
// and what said so, for the error.
func automaticProviders(opts PropertiesOptions) (map[string]bool, string) {
	var list []string
	from := "PropertiesOptions.AutomaticConfigProviders"
	if opts.AutomaticConfigProviders != nil {
		list = opts.AutomaticConfigProviders
	} else if v, ok := os.LookupEnv(EnvAutomaticConfigProviders); ok {
		list, from = strings.Split(v, ","), "the environment variable "+EnvAutomaticConfigProviders
	} else {
		return nil, ""
	}
	set := map[string]bool{}
	for _, c := range list {
		set[strings.TrimSpace(c)] = true
	}
	return set, from
}

// allowedPaths is a provider's allowed.paths (KIP-993): nil dirs allow
// every path. Java normalizes the paths (Path.normalize: "." and ".."
// removed without reading the file system) and checks that the path
// starts with an allowed one, component by component; symbolic links are
// not resolved, so a link inside an allowed directory leads out of it.
// Here both the path and its target once links are resolved must lie
// under an allowed directory (resolved too): a link out is refused.
type allowedPaths struct {
	dirs, real []string
}

// parseAllowedPaths reads allowed.paths: comma-separated, each absolute
// and existing, as Java requires.
func parseAllowedPaths(v string) (allowedPaths, error) {
	var a allowedPaths
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		c := filepath.Clean(p)
		if !filepath.IsAbs(c) {
			return a, fmt.Errorf("%q is not an absolute path", untrusted(p))
		}
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			return a, fmt.Errorf("%q does not exist", untrusted(p))
		}
		a.dirs = append(a.dirs, c)
		a.real = append(a.real, real)
	}
	return a, nil
}

// within reports whether p is base or lies under it.
func within(p string, bases []string) bool {
	for _, base := range bases {
		if p == base || strings.HasPrefix(p, strings.TrimSuffix(base, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// check returns the path to read, or why it may not be read.
func (a allowedPaths) check(p string) (string, error) {
	if a.dirs == nil {
		return p, nil
	}
	c := filepath.Clean(p)
	if !filepath.IsAbs(c) || !within(c, a.dirs) {
		return "", fmt.Errorf("%q is not under allowed.paths", untrusted(p))
	}
	real, err := filepath.EvalSymlinks(c)
	if err != nil {
		return "", fmt.Errorf("cannot read %q: %v", untrusted(p), osCause(err))
	}
	if !within(real, a.real) {
		return "", fmt.Errorf("%q leads out of allowed.paths through a symbolic link", untrusted(p))
	}
	return c, nil
}

// osCause is the operating system's words for err ("no such file or
// directory"), without the path that err repeats.
func osCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readBounded reads the regular file p, at most maxProviderFile bytes,
// charged to budget.
func readBounded(p string, budget *int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", untrusted(p), osCause(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", untrusted(p), osCause(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", untrusted(p))
	}
	if fi.Size() > maxProviderFile {
		return nil, fmt.Errorf("%q is larger than 1 MiB, the most a config provider reads", untrusted(p))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxProviderFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", untrusted(p), osCause(err))
	}
	if len(b) > maxProviderFile {
		return nil, fmt.Errorf("%q is larger than 1 MiB, the most a config provider reads", untrusted(p))
	}
	if *budget -= int64(len(b)); *budget < 0 {
		return nil, errors.New("the config providers read more than 16 MiB in all")
	}
	return b, nil
}

// fileProvider is FileConfigProvider: ${NAME:path:key} is the property
// key of the properties file at path (read as LoadProperties reads it),
// each file read once.
type fileProvider struct {
	allowed allowedPaths
	budget  *int64
	files   map[string]map[string]string
}

func (fp *fileProvider) get(path, key string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("FileConfigProvider needs a path: ${NAME:path:key}, for key %q", untrusted(key))
	}
	props, ok := fp.files[path]
	if !ok {
		p, err := fp.allowed.check(path)
		if err != nil {
			return "", err
		}
		b, err := readBounded(p, fp.budget)
		if err != nil {
			return "", err
		}
		if props, err = ParseProperties(bytes.NewReader(b)); err != nil {
			return "", fmt.Errorf("%q: %v", untrusted(path), err)
		}
		fp.files[path] = props
	}
	v, ok := props[key]
	if !ok {
		return "", fmt.Errorf("%q has no key %q", untrusted(path), untrusted(key))
	}
	return v, nil
}

// dirProvider is DirectoryConfigProvider: ${NAME:path:key} is the
// content (as is, a final newline included) of the regular file key in
// the directory path.
type dirProvider struct {
	allowed allowedPaths
	budget  *int64
}

func (dp *dirProvider) get(path, key string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("DirectoryConfigProvider needs a directory: ${NAME:directory:file}, for file %q", untrusted(key))
	}
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, `/\`) {
		return "", fmt.Errorf("%q is not a file name", untrusted(key))
	}
	dir, err := dp.allowed.check(path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", untrusted(path))
	}
	if _, err := os.Stat(filepath.Join(dir, key)); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%q has no file %q", untrusted(path), untrusted(key))
	}
	p, err := dp.allowed.check(filepath.Join(dir, key))
	if err != nil {
		return "", err
	}
	b, err := readBounded(p, dp.budget)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// envProvider is EnvVarConfigProvider: ${NAME:VAR} is the environment
// variable VAR, when its whole name matches allowlist.pattern (default:
// every variable).
type envProvider struct {
	allow *regexp.Regexp
}

func (ep *envProvider) get(path, key string) (string, error) {
	if path != "" {
		return "", fmt.Errorf("EnvVarConfigProvider takes no path: ${NAME:VARIABLE}")
	}
	if ep.allow != nil && !ep.allow.MatchString(key) {
		return "", fmt.Errorf("environment variable %q is not allowed by allowlist.pattern", untrusted(key))
	}
	v, ok := os.LookupEnv(key)
	if !ok {
		return "", fmt.Errorf("environment variable %q is not set", untrusted(key))
	}
	return v, nil
}
