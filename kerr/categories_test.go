package kerr

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// javaErrorsFile is the list kafka-clients 4.4.0 prints of every error code
// it names (Errors.values(), NONE left out): code, name, exception class,
// and the KIP-1050 categories of that class. interop/javaerrors holds the
// Java program that prints it; regenerate it, in the interop module, with
//
//	go test -run TestKerrMatchesKafkaClientsErrors . -update-java-errors
//
// which fetches kafka-clients 4.4.0 from Maven Central, runs the program and
// writes its output here (without the flag the test compares the two).
const javaErrorsFile = "testdata/errors-kafka-clients-4.4.0.tsv"

type javaErrorRow struct {
	code       int16
	name       string
	exception  string
	categories []string
}

func readJavaErrors(t *testing.T) []javaErrorRow {
	t.Helper()
	f, err := os.Open(javaErrorsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []javaErrorRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 4 {
			t.Fatalf("%s: %q has %d fields, want 4", javaErrorsFile, line, len(fields))
		}
		code, err := strconv.ParseInt(fields[0], 10, 16)
		if err != nil {
			t.Fatalf("%s: %q: %v", javaErrorsFile, line, err)
		}
		rows = append(rows, javaErrorRow{int16(code), fields[1], fields[2], strings.Split(fields[3], ",")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 130 {
		t.Fatalf("%s has %d codes; kafka-clients 4.4 names 137", javaErrorsFile, len(rows))
	}
	return rows
}

// predicates are kerr's category predicates by the category name the Java
// program prints.
var predicates = []struct {
	category string
	is       func(error) bool
}{
	{"retriable", IsRetriable},
	{"refresh-retriable", IsRefreshRetriable},
	{"abortable", IsAbortable},
	{"application-recoverable", IsApplicationRecoverable},
	{"invalid-configuration", IsInvalidConfiguration},
	{"fatal", IsFatal},
}

// TestTableMatchesKafkaClients checks every code kafka-clients 4.4 names:
// kerr knows it by the same name, and each category predicate answers as
// Java's exception class does, on the shared value, through a wrapper and
// on a WithMessage copy. Codes kerr knows that Java does not are reported.
func TestTableMatchesKafkaClients(t *testing.T) {
	rows := readJavaErrors(t)
	inJava := map[int16]bool{}
	for _, r := range rows {
		inJava[r.code] = true
		t.Run(fmt.Sprintf("%d_%s", r.code, r.name), func(t *testing.T) {
			e := lookup(r.code)
			if e == nil {
				t.Fatalf("kafka-clients 4.4 names code %d (%s, %s); kerr does not know it", r.code, r.name, r.exception)
			}
			if e.Name != r.name {
				t.Errorf("code %d is %s in kerr, %s in kafka-clients 4.4", r.code, e.Name, r.name)
			}
			if want := slices.Contains(r.categories, "retriable"); e.Retriable != want {
				t.Errorf("%s: Retriable = %v, kafka-clients 4.4's %s retriable = %v", r.name, e.Retriable, r.exception, want)
			}
			for _, err := range []error{e, fmt.Errorf("produce to t-0: %w", e), e.WithMessage("from the broker")} {
				for _, p := range predicates {
					want := slices.Contains(r.categories, p.category)
					if got := p.is(err); got != want {
						t.Errorf("%s (%s) as %q: is %s = %v, kafka-clients 4.4 says %v", r.name, r.exception, err, p.category, got, want)
					}
				}
			}
		})
	}
	for _, en := range table {
		if !inJava[en.err.Code] {
			t.Errorf("kerr knows code %d (%s); kafka-clients 4.4 does not name it", en.err.Code, en.err.Name)
		}
	}
}

// TestCategoriesOfOtherErrors: nil and errors without a Kafka code are in no
// category; a code kerr does not know is fatal, as Java maps it to
// UNKNOWN_SERVER_ERROR.
func TestCategoriesOfOtherErrors(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		fatal bool
	}{
		{"nil", nil, false},
		{"no code", errors.New("connection reset"), false},
		{"unknown code", ForCode(9999), true},
		{"negative unknown code", &Error{Code: -7, Name: "X"}, true},
	}
	for _, tc := range cases {
		for _, p := range predicates {
			want := p.category == "fatal" && tc.fatal
			if got := p.is(tc.err); got != want {
				t.Errorf("%s: is %s = %v, want %v", tc.name, p.category, got, want)
			}
		}
	}
}

func TestCategoryPredicatesDoNotAllocate(t *testing.T) {
	err := error(NotLeaderOrFollower)
	if n := testing.AllocsPerRun(100, func() {
		_ = IsRefreshRetriable(err) || IsAbortable(err) || IsApplicationRecoverable(err) || IsInvalidConfiguration(err) || IsFatal(err)
	}); n != 0 {
		t.Fatalf("the category predicates allocate %v", n)
	}
}

// TestCategoriesThroughJoinedErrors: the predicates find the *Error as
// errors.As does, in a joined error too.
func TestCategoriesThroughJoinedErrors(t *testing.T) {
	err := fmt.Errorf("commit: %w", errors.Join(errors.New("first"), fmt.Errorf("second: %w", ProducerFenced)))
	if !IsApplicationRecoverable(err) || IsFatal(err) || IsRetriable(err) {
		t.Fatalf("%v: application-recoverable %v, fatal %v", err, IsApplicationRecoverable(err), IsFatal(err))
	}
	if !IsAbortable(fmt.Errorf("x: %w", TransactionAbortable)) || !IsInvalidConfiguration(fmt.Errorf("x: %w", TopicAuthorizationFailed)) {
		t.Fatal("abortable or invalid configuration not found through a wrapper")
	}
}
