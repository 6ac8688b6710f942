// Package awsmskiam is the AWS_MSK_IAM SASL mechanism of Amazon MSK's IAM
// access control, for producer.Config.SASL. It lives in a Go module of its
// own (github.com/samsa-go/samsa/sasl/awsmskiam) so that the samsa module
// never downloads the AWS SDK.
//
//	mech, err := awsmskiam.FromDefaultChain(ctx, "us-east-1")
//	if err != nil { ... }
//	p, err := producer.New(producer.Config{
//		Brokers: []string{"b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9098"},
//		TLS:     &tls.Config{},
//		SASL:    mech,
//	})
//
// # The exchange
//
// For every connection and every re-authentication (KIP-368; MSK sessions
// last as long as the credentials, at most 15 minutes past the signature's
// X-Amz-Expires), the mechanism fetches credentials from its provider (the
// SDK's provider caches and refreshes them) and sends one JSON object: a
// SigV4 presigned "GET /?Action=kafka-cluster:Connect" for the broker's
// host and the service kafka-cluster, its query parameters as lower-case
// keys (version 2020_10_22, host, user-agent, action, x-amz-algorithm,
// x-amz-credential, x-amz-date, x-amz-expires, x-amz-signedheaders,
// x-amz-security-token when the credentials have a session token, and
// x-amz-signature), as the aws-msk-iam-auth library defines it. The broker
// answers with a JSON object holding its version and a request id, which
// ends the exchange; a rejected signature is SASL_AUTHENTICATION_FAILED,
// reported as producer.ErrAuthentication.
//
// The signature comes from the SDK's SigV4 signer (aws/signer/v4), and the
// credentials from the SDK's standard chain (environment, shared config and
// credentials files, SSO, web identity, ECS and EC2 roles) or any
// aws.CredentialsProvider. Nothing here prints a secret key or a session
// token.
package awsmskiam
