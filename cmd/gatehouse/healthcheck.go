package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"gatehouse/internal/config"
)

// healthcheckCmd is what a container's HEALTHCHECK runs. The image is
// distroless (no shell, no curl), so the binary probes itself: the exit
// status is the answer, 0 healthy and 1 not.
type healthcheckCmd struct {
	URL     string        `help:"URL to GET (default: /healthz on the port the config listens on, over loopback)."`
	Config  string        `short:"c" env:"GATEHOUSE_CONFIG" type:"path" help:"Config whose listen address to probe (default: the built-in 127.0.0.1:8080)."`
	Timeout time.Duration `default:"3s" help:"Give up after this long."`
}

func (c *healthcheckCmd) Run() error { return c.run(os.Stdout) }

func (c *healthcheckCmd) run(w io.Writer) error {
	url := c.URL
	if url == "" {
		listen := config.DefaultListen
		if c.Config != "" {
			cfg, err := config.Load(c.Config, providerTypes())
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			listen = cfg.Listen
		}
		var err error
		if url, err = healthURL(listen); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	if err := probe(ctx, url); err != nil {
		return err
	}
	fmt.Fprintln(w, "healthy:", url)
	return nil
}

// healthURL is where a process on the same host reaches a server
// listening on listen: a wildcard address (0.0.0.0, ::, or no host, as a
// container listens) is probed through the loopback address of its family.
func healthURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("healthcheck: listen address %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// probe GETs url and wants a 200. It goes direct: a proxy from the
// environment must not stand between a process and its own port.
func probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s", url, resp.Status)
	}
	return nil
}
