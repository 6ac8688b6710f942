package awsmskiam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/samsa-go/samsa/sasl"
)

// Name is the mechanism's name in SaslHandshake.
const Name = "AWS_MSK_IAM"

const (
	service        = "kafka-cluster"
	action         = "kafka-cluster:Connect"
	payloadVersion = "2020_10_22"
	// emptyPayloadHash is the hex SHA-256 of an empty body.
	emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// DefaultExpiry is the signature's X-Amz-Expires, as in aws-msk-iam-auth.
	DefaultExpiry = 15 * time.Minute
)

// Options configure the mechanism.
type Options struct {
	// Credentials provide the AWS credentials, fetched for every exchange
	// (wrap a provider in aws.NewCredentialsCache so that it is not asked
	// every time; config.LoadDefaultConfig does). Required.
	Credentials aws.CredentialsProvider

	// Region is the cluster's AWS region. Default: taken from the
	// broker's host name (b-1.name.id.c2.kafka.REGION.amazonaws.com, or
	// kafka-serverless.REGION.amazonaws.com); an exchange with a broker
	// whose name has none fails.
	Region string

	// UserAgent is sent in the payload. Default "samsa".
	UserAgent string

	// Expiry is the signature's X-Amz-Expires. Default DefaultExpiry.
	Expiry time.Duration

	// Now is the signing clock, for tests. Default time.Now.
	Now func() time.Time
}

// New returns the AWS_MSK_IAM mechanism with opts. It fails if
// opts.Credentials is nil.
func New(opts Options) (sasl.Mechanism, error) {
	if opts.Credentials == nil {
		return nil, errors.New("awsmskiam: Options.Credentials is required")
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "samsa"
	}
	if opts.Expiry <= 0 {
		opts.Expiry = DefaultExpiry
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &mechanism{opts: opts, signer: v4.NewSigner()}, nil
}

// FromDefaultChain returns the mechanism with the credentials of the AWS
// SDK's default chain (config.LoadDefaultConfig: environment variables,
// shared config and credentials files and profiles, SSO, web identity, ECS
// and EC2 instance roles), cached and refreshed by the SDK. region may be
// empty: the chain's region (AWS_REGION, the profile) is then used, or
// else the one in each broker's host name.
func FromDefaultChain(ctx context.Context, region string, optFns ...func(*config.LoadOptions) error) (sasl.Mechanism, error) {
	if region != "" {
		optFns = append([]func(*config.LoadOptions) error{config.WithRegion(region)}, optFns...)
	}
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return nil, fmt.Errorf("awsmskiam: loading the AWS configuration: %w", err)
	}
	return New(Options{Credentials: cfg.Credentials, Region: cfg.Region})
}

type mechanism struct {
	opts   Options
	signer *v4.Signer
}

func (*mechanism) Name() string { return Name }

func (m *mechanism) String() string {
	return fmt.Sprintf("%s(region=%q)", Name, m.opts.Region)
}

func (m *mechanism) GoString() string { return m.String() }

// Format prints String for every verb: the mechanism holds no secret
// itself, but its provider might.
func (m *mechanism) Format(f fmt.State, verb rune) { fmt.Fprint(f, m.String()) }

func (m *mechanism) Start(ctx context.Context, addr string) (sasl.Session, []byte, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	region := m.opts.Region
	if region == "" {
		if region = regionOf(host); region == "" {
			return nil, nil, fmt.Errorf("awsmskiam: no region configured and none in the broker host %q", host)
		}
	}
	creds, err := m.opts.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("awsmskiam: retrieving AWS credentials: %w", err)
	}
	msg, err := m.payload(ctx, creds, host, region, m.opts.Now().UTC())
	if err != nil {
		return nil, nil, err
	}
	return session{}, msg, nil
}

// payload is the client's one message: the presigned Connect request's
// query parameters as a JSON object.
func (m *mechanism) payload(ctx context.Context, creds aws.Credentials, host, region string, now time.Time) ([]byte, error) {
	q := url.Values{}
	q.Set("Action", action)
	q.Set("X-Amz-Expires", strconv.FormatInt(int64(m.opts.Expiry/time.Second), 10))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("awsmskiam: %w", err)
	}
	signed, _, err := m.signer.PresignHTTP(ctx, creds, req, emptyPayloadHash, service, region, now)
	if err != nil {
		return nil, fmt.Errorf("awsmskiam: signing: %w", err)
	}
	u, err := url.Parse(signed)
	if err != nil {
		return nil, fmt.Errorf("awsmskiam: the signed URL: %w", err)
	}
	fields := map[string]string{
		"version":    payloadVersion,
		"host":       host,
		"user-agent": m.opts.UserAgent,
	}
	for k, vs := range u.Query() {
		if len(vs) > 0 {
			fields[strings.ToLower(k)] = vs[0]
		}
	}
	return json.Marshal(fields)
}

// regionOf finds the region in an MSK broker host name: the label after
// "kafka" or "kafka-serverless", before "amazonaws".
func regionOf(host string) string {
	labels := strings.Split(strings.ToLower(host), ".")
	for i := 0; i+2 < len(labels); i++ {
		if (labels[i] == "kafka" || labels[i] == "kafka-serverless") && labels[i+2] == "amazonaws" {
			return labels[i+1]
		}
	}
	return ""
}

// session: the broker's answer ({"version": ..., "request-id": ...}) ends
// the exchange.
type session struct{}

func (session) Step(challenge []byte) (bool, []byte, error) {
	if len(challenge) > 0 {
		var resp struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(challenge, &resp); err != nil {
			return false, nil, fmt.Errorf("awsmskiam: the broker's answer is not JSON: %w", err)
		}
	}
	return true, nil, nil
}
