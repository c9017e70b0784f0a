package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/bedrock"
)

// bedrockDeployment completes d for Amazon Bedrock, resolving
// credentials and region from the config and the process environment
// once, at config load, so a missing one is a startup error rather than a
// failed request.
func bedrockDeployment(p *config.Provider, d provider.Deployment) (provider.Deployment, *http.Transport, error) {
	return bedrockSetup(p, d, os.Getenv)
}

// bedrockSetup is bedrockDeployment with the environment passed in.
//
// Credentials: the provider's api_key, else AWS_BEARER_TOKEN_BEDROCK, is
// a Bedrock API key sent as a bearer token; otherwise requests are SigV4
// signed with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the optional
// AWS_SESSION_TOKEN. Region: the provider's region, else AWS_REGION, else
// AWS_DEFAULT_REGION. base_url replaces the public endpoint (VPC
// endpoints, tests).
func bedrockSetup(p *config.Provider, d provider.Deployment, getenv func(string) string) (provider.Deployment, *http.Transport, error) {
	region := firstNonEmpty(p.Region, getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"))
	a := &bedrock.Adapter{BearerToken: firstNonEmpty(p.APIKey, getenv("AWS_BEARER_TOKEN_BEDROCK"))}
	if a.BearerToken == "" {
		id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
		if id == "" || secret == "" {
			return d, nil, fmt.Errorf("provider %q (type bedrock): no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK or api_key", p.Name)
		}
		if region == "" {
			return d, nil, fmt.Errorf("provider %q (type bedrock): no AWS region to sign for: set region in the config, or AWS_REGION", p.Name)
		}
		a.Credentials = aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN"), Source: "environment"}
		a.Signer = v4.NewSigner()
	}
	switch {
	case p.BaseURL != "":
		d.BaseURL = strings.TrimRight(p.BaseURL, "/")
	case region == "":
		return d, nil, fmt.Errorf("provider %q (type bedrock): no AWS region: set region in the config, or AWS_REGION, or a base_url", p.Name)
	default:
		d.BaseURL = bedrock.Endpoint(region)
	}
	d.Region = region
	d.Adapter = a
	t := provider.NewTransport()
	d.Client = &http.Client{Transport: t}
	return d, t, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
