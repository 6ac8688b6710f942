package producer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"separators", "a=1\nb: 2\nc 3\nd\t=\t4\ne:=5\n", map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "=5"}},
		{"comments and blanks", "# c\n  ! c\n\n   \nk=v\n", map[string]string{"k": "v"}},
		{"continuation", "k=one, \\\n    two, \\\n    three\nnext=x", map[string]string{"k": "one, two, three", "next": "x"}},
		{"escaped backslash does not continue", "k=a\\\\\nj=b", map[string]string{"k": `a\`, "j": "b"}},
		{"escapes", `k=tab\there\nnl \u00e9 \=\:\# \q`, map[string]string{"k": "tab\there\nnl é =:# q"}},
		{"escaped separator in key", `my\=key=v`, map[string]string{"my=key": "v"}},
		{"empty value", "k=\nj", map[string]string{"k": "", "j": ""}},
		{"last wins", "k=1\nk=2", map[string]string{"k": "2"}},
		{"trailing spaces kept", "k=v  ", map[string]string{"k": "v  "}},
		{"surrogate pair", `k=\ud83d\ude00`, map[string]string{"k": "😀"}},
		{"BOM and CRLF", "\uFEFFa=1\r\nb=2\r\n", map[string]string{"a": "1\r", "b": "2\r"}},
		{"JAAS line", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY' password='SECRET';`,
			map[string]string{"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY' password='SECRET';`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := producer.ParseProperties(strings.NewReader(tt.in))
			require.NoError(t, err)
			if tt.name == "BOM and CRLF" {
				// bufio.Scanner drops \r with the line break.
				tt.want = map[string]string{"a": "1", "b": "2"}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParsePropertiesErrorsHideValues(t *testing.T) {
	_, err := producer.ParseProperties(strings.NewReader("ok=1\nsasl.password=SECRET\\u12"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "sasl.password")
	assert.NotContains(t, err.Error(), "SECRET")
}

func TestLoadProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(path, []byte("bootstrap.servers=k1:9092,k2:9092\nlinger.ms = 20\n"), 0o600))
	props, err := producer.LoadProperties(path)
	require.NoError(t, err)
	cfg, err := producer.ConfigFromProperties(props)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1:9092", "k2:9092"}, cfg.Brokers)

	_, err = producer.LoadProperties(filepath.Join(t.TempDir(), "missing.properties"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
