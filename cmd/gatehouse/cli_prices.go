package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

// pricesCmd: gatehouse prices list|set|delete, the price overrides of
// the admin API (USD per million tokens, by upstream model id).
type pricesCmd struct {
	List   pricesListCmd   `cmd:"" help:"List the price overrides in effect (the store's and the config's)."`
	Set    pricesSetCmd    `cmd:"" help:"Set a model's price (creates or replaces); the gateway uses it from the next request."`
	Delete pricesDeleteCmd `cmd:"" help:"Remove a model's stored price; the config's or the catalog's applies again."`
}

var priceColumns = []column{
	{"MODEL", str("model")}, {"INPUT", str("input")}, {"CACHED INPUT", str("cached_input")}, {"OUTPUT", str("output")},
	{"SOURCE", str("source")}, {"UPDATED", str("updated_at")},
}

var priceFields = []string{"model", "input", "cached_input", "output", "source", "updated_at"}

func pricePath(model string) string { return "/admin/prices/" + url.PathEscape(model) }

type pricesListCmd struct {
	adminFlags `embed:""`
}

func (c *pricesListCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *pricesListCmd) run(ctx context.Context, w io.Writer) error {
	rows, err := c.listAll(ctx, "/admin/prices", url.Values{})
	if err != nil {
		return err
	}
	return c.showList(w, rows, priceColumns)
}

type pricesSetCmd struct {
	adminFlags  `embed:""`
	Model       string   `arg:"" help:"Upstream model id, e.g. gpt-4o."`
	Input       float64  `required:"" help:"USD per million prompt tokens."`
	Output      float64  `required:"" help:"USD per million completion tokens."`
	CachedInput *float64 `name:"cached-input" help:"USD per million cached prompt tokens (default: the input price)."`
}

func (c *pricesSetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *pricesSetCmd) run(ctx context.Context, w io.Writer) error {
	body := settings{"input": c.Input, "output": c.Output}
	if c.CachedInput != nil {
		body["cached_input"] = *c.CachedInput
	}
	raw, err := c.call(ctx, http.MethodPut, pricePath(c.Model), body)
	if err != nil {
		return err
	}
	return c.show(w, raw, priceFields)
}

type pricesDeleteCmd struct {
	adminFlags `embed:""`
	Model      string `arg:"" help:"Upstream model id."`
}

func (c *pricesDeleteCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *pricesDeleteCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodDelete, pricePath(c.Model), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	fmt.Fprintf(w, "Deleted the stored price of %s.\n", c.Model)
	return nil
}
