package bedrock

import (
	"strings"
	"testing"

	"gatehouse/internal/provider"
)

func TestTypeResolvesCredentialsAndRegion(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	r := &provider.Registry{}
	r.Register(Type())
	for _, c := range []struct {
		name     string
		s        provider.Settings
		env      func(string) string
		wantErr  string
		wantBase string
		signed   bool
	}{
		{"env credentials and region", provider.Settings{}, env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "s", "AWS_DEFAULT_REGION", "eu-west-1"), "", "https://bedrock-runtime.eu-west-1.amazonaws.com", true},
		{"config region wins", provider.Settings{Region: "us-east-2"}, env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "s", "AWS_REGION", "eu-west-1"), "", "https://bedrock-runtime.us-east-2.amazonaws.com", true},
		{"no credentials", provider.Settings{Region: "us-east-1"}, env(), "no AWS credentials", "", false},
		{"no region", provider.Settings{}, env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "s"), "no AWS region", "", false},
		{"api key and base_url need no region", provider.Settings{APIKey: "k", BaseURL: "http://vpce.example/"}, env(), "", "http://vpce.example", false},
		{"bearer token from the environment", provider.Settings{Region: "us-west-2"}, env("AWS_BEARER_TOKEN_BEDROCK", "tok"), "", "https://bedrock-runtime.us-west-2.amazonaws.com", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.Name, c.s.Type, c.s.Getenv = "b", "bedrock", c.env
			d, _, err := r.Deployment(c.s)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), `provider "b" (type bedrock)`) {
					t.Fatalf("err %v, want %q about provider b", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.BaseURL != c.wantBase {
				t.Fatalf("base %q, want %q", d.BaseURL, c.wantBase)
			}
			a, ok := d.Adapter.(*Adapter)
			if !ok {
				t.Fatalf("adapter %T", d.Adapter)
			}
			if signed := a.BearerToken == ""; signed != c.signed || signed && a.Credentials.AccessKeyID != "a" {
				t.Fatalf("signed %v (bearer %q, key id %q), want signed %v", signed, a.BearerToken, a.Credentials.AccessKeyID, c.signed)
			}
		})
	}
}
