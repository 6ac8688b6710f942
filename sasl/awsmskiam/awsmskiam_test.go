package awsmskiam

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testAKID   = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testToken  = "session/token+with=odd&chars"
	testHost   = "b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com"
)

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fixed(token string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: token}, nil
	})
}

func startPayload(t *testing.T, opts Options) map[string]string {
	t.Helper()
	m, err := New(opts)
	require.NoError(t, err)
	assert.Equal(t, "AWS_MSK_IAM", m.Name())
	sess, msg, err := m.Start(context.Background(), testHost+":9098")
	require.NoError(t, err)
	var fields map[string]string
	require.NoError(t, json.Unmarshal(msg, &fields))
	done, next, err := sess.Step([]byte(`{"version":"2020_10_22","request-id":"abc"}`))
	require.NoError(t, err)
	assert.True(t, done)
	assert.Nil(t, next)
	return fields
}

// awsEscape is SigV4's URI encoding: everything but A-Z a-z 0-9 - _ . ~.
func awsEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// handSignature computes the SigV4 query signature of the Connect request
// from the specification, without the SDK.
func handSignature(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var q []string
	for _, k := range keys {
		q = append(q, awsEscape(k)+"="+awsEscape(params[k]))
	}
	canonical := "GET\n/\n" + strings.Join(q, "&") + "\nhost:" + testHost + "\n\nhost\n" + emptyPayloadHash
	sum := sha256.Sum256([]byte(canonical))
	day := testTime.Format("20060102")
	scope := day + "/us-east-1/kafka-cluster/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + testTime.Format("20060102T150405Z") + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+testSecret), day)
	k = hmacSHA256(k, "us-east-1")
	k = hmacSHA256(k, "kafka-cluster")
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, sts))
}

// sdkSignature presigns the same request with the SDK's signer.
func sdkSignature(t *testing.T, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+testHost+"/?Action=kafka-cluster%3AConnect&X-Amz-Expires=900", nil)
	require.NoError(t, err)
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: token},
		req, emptyPayloadHash, "kafka-cluster", "us-east-1", testTime)
	require.NoError(t, err)
	u, err := url.Parse(signed)
	require.NoError(t, err)
	return u.Query().Get("X-Amz-Signature")
}

func TestPayload(t *testing.T) {
	for _, token := range []string{"", testToken} {
		t.Run(fmt.Sprintf("session token %v", token != ""), func(t *testing.T) {
			fields := startPayload(t, Options{Credentials: fixed(token), Region: "us-east-1", UserAgent: "samsa-test", Now: func() time.Time { return testTime }})
			want := map[string]string{
				"version":             "2020_10_22",
				"host":                testHost,
				"user-agent":          "samsa-test",
				"action":              "kafka-cluster:Connect",
				"x-amz-algorithm":     "AWS4-HMAC-SHA256",
				"x-amz-credential":    testAKID + "/20260102/us-east-1/kafka-cluster/aws4_request",
				"x-amz-date":          "20260102T030405Z",
				"x-amz-expires":       "900",
				"x-amz-signedheaders": "host",
			}
			params := map[string]string{
				"Action": want["action"], "X-Amz-Algorithm": want["x-amz-algorithm"], "X-Amz-Credential": want["x-amz-credential"],
				"X-Amz-Date": want["x-amz-date"], "X-Amz-Expires": want["x-amz-expires"], "X-Amz-SignedHeaders": want["x-amz-signedheaders"],
			}
			if token != "" {
				want["x-amz-security-token"] = token
				params["X-Amz-Security-Token"] = token
			}
			sig := fields["x-amz-signature"]
			delete(fields, "x-amz-signature")
			assert.Equal(t, want, fields)
			assert.Len(t, sig, 64)
			assert.Equal(t, sdkSignature(t, token), sig, "the SDK's signer, on its own request")
			assert.Equal(t, handSignature(params), sig, "SigV4 computed by hand from the specification")
		})
	}
}

func TestRegionFromHost(t *testing.T) {
	for host, want := range map[string]string{
		"b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com":          "us-east-1",
		"boot-abc.c1.kafka-serverless.eu-west-3.amazonaws.com":      "eu-west-3",
		"b-2-public.demo.xyz.c3.kafka.ap-southeast-2.amazonaws.com": "ap-southeast-2",
		"kafka.example.com": "",
		"127.0.0.1":         "",
	} {
		assert.Equal(t, want, regionOf(host), host)
	}
	fields := startPayload(t, Options{Credentials: fixed(""), Now: func() time.Time { return testTime }})
	assert.Equal(t, testAKID+"/20260102/us-east-1/kafka-cluster/aws4_request", fields["x-amz-credential"])

	m, err := New(Options{Credentials: fixed("")})
	require.NoError(t, err)
	_, _, err = m.Start(context.Background(), "kafka.example.com:9098")
	assert.ErrorContains(t, err, "no region")
}

func TestErrorsAndSecrets(t *testing.T) {
	_, err := New(Options{})
	assert.Error(t, err)

	boom := fmt.Errorf("no credentials in the chain")
	m, err := New(Options{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, boom
	})})
	require.NoError(t, err)
	_, _, err = m.Start(context.Background(), testHost+":9098")
	assert.ErrorIs(t, err, boom)

	m, err = New(Options{Region: "us-east-1", Credentials: fixed(testToken)})
	require.NoError(t, err)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, struct{ SASL any }{m})
		assert.NotContains(t, out, testSecret)
		assert.NotContains(t, out, "session/token")
	}

	_, next, err := session{}.Step([]byte("not json"))
	assert.Error(t, err)
	assert.Nil(t, next)
}
