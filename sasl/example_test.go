package sasl_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

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
