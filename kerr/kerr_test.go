package kerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestForCode(t *testing.T) {
	cases := []struct {
		code      int16
		want      error
		name      string
		retriable bool
	}{
		{0, nil, "", false},
		{-1, UnknownServerError, "UNKNOWN_SERVER_ERROR", false},
		{3, UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true},
		{6, NotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true},
		{10, MessageTooLarge, "MESSAGE_TOO_LARGE", false},
		{29, TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", false},
		{45, OutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER", false},
		{89, ThrottlingQuotaExceeded, "THROTTLING_QUOTA_EXCEEDED", true},
		{133, nil, "SHARE_SESSION_LIMIT_REACHED", true},
	}
	for _, tc := range cases {
		got := ForCode(tc.code)
		if tc.code == 0 {
			if got != nil {
				t.Fatalf("ForCode(0) = %v, want nil", got)
			}
			continue
		}
		var ke *Error
		if !errors.As(got, &ke) {
			t.Fatalf("ForCode(%d) = %T, want *Error", tc.code, got)
		}
		if ke.Code != tc.code || ke.Name != tc.name || ke.Retriable != tc.retriable {
			t.Errorf("ForCode(%d) = %+v, want name %s retriable %v", tc.code, ke, tc.name, tc.retriable)
		}
		if tc.want != nil && got != tc.want {
			t.Errorf("ForCode(%d) is not the exported variable", tc.code)
		}
		if IsRetriable(got) != tc.retriable {
			t.Errorf("IsRetriable(%s) = %v", tc.name, !tc.retriable)
		}
	}
}

func TestTableIsConsistent(t *testing.T) {
	seen := map[int16]string{}
	for _, en := range table {
		e := en.err
		if prev, ok := seen[e.Code]; ok {
			t.Fatalf("code %d used by %s and %s", e.Code, prev, e.Name)
		}
		seen[e.Code] = e.Name
		if e.Name == "" || e.Message == "" {
			t.Errorf("code %d lacks a name or message", e.Code)
		}
	}
	for c := int16(-1); c <= 136; c++ {
		if c == 0 {
			continue
		}
		if _, ok := seen[c]; !ok {
			t.Errorf("code %d missing from the table", c)
		}
	}
}

func TestUnknownCode(t *testing.T) {
	err := ForCode(9999)
	var ke *Error
	if !errors.As(err, &ke) || ke.Code != 9999 || ke.Retriable {
		t.Fatalf("ForCode(9999) = %#v", err)
	}
	if errors.Is(err, UnknownServerError) {
		t.Fatal("an unknown code must not match UNKNOWN_SERVER_ERROR")
	}
}

// TestIsComparesByCode protects errors.Is through wrappers and WithMessage copies.
func TestIsComparesByCode(t *testing.T) {
	err := fmt.Errorf("produce to t-0: %w", NotLeaderOrFollower.WithMessage("leader moved to 2"))
	if !errors.Is(err, NotLeaderOrFollower) {
		t.Fatal("errors.Is through a wrapper and WithMessage copy failed")
	}
	if errors.Is(err, LeaderNotAvailable) {
		t.Fatal("different codes must not match")
	}
	if !IsRetriable(err) || IsRetriable(errors.New("x")) || IsRetriable(nil) {
		t.Fatal("IsRetriable wrong")
	}
	if got := NotLeaderOrFollower.WithMessage("m").Error(); got != "NOT_LEADER_OR_FOLLOWER: m" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestForCodeDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = ForCode(6) }); n != 0 {
		t.Fatalf("ForCode allocates %v", n)
	}
}

// TestWithMessageBoundsBrokerText: a broker's message is bounded and
// escaped where it enters an error, so a megabyte of it (or a newline that
// would start a forged log line) never reaches a record's error.
func TestWithMessageBoundsBrokerText(t *testing.T) {
	cases := []struct {
		name, msg, want string
	}{
		{"short", "Invalid username or password", "SASL_AUTHENTICATION_FAILED: Invalid username or password"},
		{"newline", "oops\nlevel=ERROR msg=forged", `SASL_AUTHENTICATION_FAILED: oops\nlevel=ERROR msg=forged`},
		{"NUL", "a\x00b", `SASL_AUTHENTICATION_FAILED: a\x00b`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SASLAuthenticationFailed.WithMessage(tc.msg).Error(); got != tc.want {
				t.Fatalf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	huge := make([]byte, 24<<20)
	for i := range huge {
		huge[i] = 'm'
	}
	err := SASLAuthenticationFailed.WithMessage(string(huge))
	if n := len(err.Error()); n > 300 {
		t.Fatalf("a 24 MiB message gave an error of %d bytes", n)
	}
	if !errors.Is(err, SASLAuthenticationFailed) {
		t.Fatal("the copy does not match its code")
	}
}
