package bedrock

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"gatehouse/internal/provider"
)

// Type is the "bedrock" provider type. Credentials and region are
// resolved from the config and the process environment once, at config
// load, so a missing one is a startup error rather than a failed request.
//
// Credentials: the provider's api_key, else AWS_BEARER_TOKEN_BEDROCK, is
// a Bedrock API key sent as a bearer token; otherwise requests are SigV4
// signed with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the optional
// AWS_SESSION_TOKEN. Region: the provider's region, else AWS_REGION, else
// AWS_DEFAULT_REGION. base_url replaces the public endpoint (VPC
// endpoints, tests).
func Type() provider.Type {
	return provider.Type{Name: "bedrock", Options: []provider.Option{provider.OptionRegion}, New: setup}
}

func setup(s provider.Settings, d *provider.Deployment) error {
	region := firstNonEmpty(s.Region, s.Env("AWS_REGION"), s.Env("AWS_DEFAULT_REGION"))
	a := &Adapter{BearerToken: firstNonEmpty(s.APIKey, s.Env("AWS_BEARER_TOKEN_BEDROCK"))}
	if a.BearerToken == "" {
		id, secret := s.Env("AWS_ACCESS_KEY_ID"), s.Env("AWS_SECRET_ACCESS_KEY")
		if id == "" || secret == "" {
			return errors.New("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK or api_key")
		}
		if region == "" {
			return errors.New("no AWS region to sign for: set region in the config, or AWS_REGION")
		}
		a.Credentials = aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: s.Env("AWS_SESSION_TOKEN"), Source: "environment"}
		a.Signer = v4.NewSigner()
	}
	switch {
	case s.BaseURL != "":
		d.BaseURL = s.BaseURL
	case region == "":
		return errors.New("no AWS region: set region in the config, or AWS_REGION, or a base_url")
	default:
		d.BaseURL = Endpoint(region)
	}
	d.Region = region
	d.Adapter = a
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
