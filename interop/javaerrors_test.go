package interop

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateJavaErrors = flag.Bool("update-java-errors", false,
	"TestKerrMatchesKafkaClientsErrors writes kafka-clients' live list to kerr/testdata instead of comparing")

// javaErrorsFile is kerr's committed copy of the list JavaErrorCategories
// prints; kerr's TestTableMatchesKafkaClients checks kerr's table and
// category predicates against it row by row.
var javaErrorsFile = filepath.Join("..", "kerr", "testdata", "errors-kafka-clients-4.4.0.tsv")

// TestKerrMatchesKafkaClientsErrors runs javaerrors/JavaErrorCategories.java
// against kafka-clients 4.4.0 from Maven Central: it prints every code of
// Errors.values() with its exception class and the KIP-1050 categories
// that class extends into. The live list must equal kerr's committed copy,
// so that a change of kafka-clients (or of the program) cannot leave kerr's
// table test checking a stale list. With -update-java-errors it rewrites
// the copy instead. It skips without java, javac or mvn unless CI is set.
func TestKerrMatchesKafkaClientsErrors(t *testing.T) {
	cmdline := javaCommand(t, "javaerrors", "JavaErrorCategories", "the comparison with kafka-clients' error categories")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "java JavaErrorCategories:\n%s", stderr.String())
	live := stdout.String()
	require.Contains(t, live, "\n6\tNOT_LEADER_OR_FOLLOWER\tNotLeaderOrFollowerException\tretriable,refresh-retriable\n",
		"JavaErrorCategories printed no NOT_LEADER_OR_FOLLOWER line")
	if *updateJavaErrors {
		require.NoError(t, os.WriteFile(javaErrorsFile, []byte(live), 0o644))
		t.Logf("wrote %s (%d codes)", javaErrorsFile, strings.Count(live, "\n")-1)
		return
	}
	committed, err := os.ReadFile(javaErrorsFile)
	require.NoError(t, err)
	liveLines, committedLines := strings.Split(live, "\n"), strings.Split(string(committed), "\n")
	for _, l := range liveLines {
		if !slices.Contains(committedLines, l) {
			t.Errorf("kafka-clients 4.4.0 prints %q, which %s lacks", l, javaErrorsFile)
		}
	}
	for _, l := range committedLines {
		if !slices.Contains(liveLines, l) {
			t.Errorf("%s has %q, which kafka-clients 4.4.0 does not print", javaErrorsFile, l)
		}
	}
	if !t.Failed() {
		assert.Equal(t, committedLines, liveLines, "the same lines in another order")
	}
	if t.Failed() {
		t.Logf("regenerate %s with go test -run TestKerrMatchesKafkaClientsErrors . -update-java-errors (in interop), then make kerr's table agree", javaErrorsFile)
	}
}
