package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

type cacheCmd struct {
	Purge cachePurgeCmd `cmd:"" help:"Empty the response cache, of one project or of all, in every tier (DELETE /admin/cache)."`
}

type cachePurgeCmd struct {
	adminFlags `embed:""`
	Project    string `help:"The project's name or id; without it every project's entries go."`
}

func (c *cachePurgeCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *cachePurgeCmd) run(ctx context.Context, w io.Writer) error {
	path := "/admin/cache"
	if c.Project != "" {
		path += "?project=" + url.QueryEscape(c.Project)
	}
	raw, err := c.call(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	var out struct {
		Project string `json:"project"`
		Deleted int    `json:"deleted"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	what := "every project"
	if out.Project != "" {
		what = "project " + out.Project
	}
	fmt.Fprintf(w, "Purged %d cache entries of %s.\n", out.Deleted, what)
	return nil
}
