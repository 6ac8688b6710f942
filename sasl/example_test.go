package sasl_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/samsa-go/samsa/sasl"
)

// ExampleClientCredentials logs in to a token endpoint (here a local one)
// with the client credentials grant and hands the token to OAuthBearer.
func ExampleClientCredentials() {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, secret, _ := r.BasicAuth(); id != "svc" || secret != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"eyJ.example.token","token_type":"Bearer","expires_in":3600}`)
	}))
	defer idp.Close()

	tokens, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
		TokenURL:     idp.URL + "/oauth2/token",
		ClientID:     "svc",
		ClientSecret: "s3cret",
		Extensions:   map[string]string{"logicalCluster": "lkc-1"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mech := sasl.OAuthBearer(tokens) // producer.Config.SASL
	_, first, err := mech.Start(context.Background(), "broker:9093")
	fmt.Printf("%q %v\n", first, err)

	refused, _ := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
		TokenURL: idp.URL + "/oauth2/token", ClientID: "svc", ClientSecret: "wrong",
	})
	_, err = refused(context.Background())
	var te *sasl.TokenEndpointError
	fmt.Println(errors.As(err, &te), te.StatusCode, te.Code)
	// Output:
	// "n,,\x01auth=Bearer eyJ.example.token\x01logicalCluster=lkc-1\x01\x01" <nil>
	// true 401 invalid_client
}

// ExampleJWTBearer logs in without a client secret: an assertion signed
// with the client's key (a P-256 key here, ES256) is the grant
// (KIP-1139). ClientCredentialsConfig.Assertion sends the same assertion
// as the client's authentication in the client credentials grant
// instead (KIP-1258's private_key_jwt).
func ExampleJWTBearer() {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.FormValue("assertion") == "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"eyJ.example.token","token_type":"Bearer","expires_in":3600}`)
	}))
	defer idp.Close()
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	keyFile := filepath.Join(dir, "client.key")
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)

	tokens, err := sasl.JWTBearer(sasl.ClientCredentialsConfig{
		TokenURL: idp.URL + "/oauth2/token",
		Assertion: &sasl.AssertionConfig{
			PrivateKeyFile: keyFile,
			Algorithm:      "ES256",
			Issuer:         "svc",
			Subject:        "svc",
			Audience:       idp.URL + "/oauth2/token",
			IncludeJTI:     true,
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := tokens(context.Background())
	fmt.Println(tok.Value, err)
	// Output:
	// eyJ.example.token <nil>
}
