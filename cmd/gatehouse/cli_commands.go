package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// keysCmd and its subcommands: gatehouse keys create|list|get|revoke|rotate.
type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create a virtual key. Its secret is printed once; store it then."`
	List   keysListCmd   `cmd:"" help:"List keys (revoked ones too)."`
	Get    keysGetCmd    `cmd:"" help:"Show a key (never its secret)."`
	Update keysUpdateCmd `cmd:"" help:"Change a key's settings (only the flags given)."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key: it stops working at once."`
	Rotate keysRotateCmd `cmd:"" help:"Give a key a new secret (same ID, settings and counters); prints it once."`
}

var keyColumns = []column{
	{"ID", str("id")}, {"NAME", str("name")}, {"PROJECT", str("project_id")}, {"PREFIX", str("prefix")},
	{"STATUS", str("status")}, {"RPM", str("rpm")}, {"TPM", str("tpm")}, {"BUDGET", str("budget")},
	{"MODELS", str("models")}, {"EXPIRES", str("expires_at")}, {"LAST USED", str("last_used_at")},
}

var keyFields = []string{"id", "name", "project_id", "prefix", "status", "read_only", "rpm", "tpm", "model_limits", "budget",
	"models", "providers", "labels", "no_cache", "expires_at", "revoked_at", "last_used_at", "created_at", "updated_at"}

// keySettings are the flags of create and update.
type keySettings struct {
	Name   *string  `help:"A name for people."`
	RPM    *int     `name:"rpm" help:"Requests per minute (0 = unlimited)."`
	TPM    *int     `name:"tpm" help:"Tokens per minute (0 = unlimited)."`
	Budget *string  `help:"Spend cap as USD/PERIOD, e.g. 10/month (day, week, month, total); none clears it."`
	Models []string `sep:"," help:"Allowed models, comma-separated (default: the project's)."`
	// Providers given at all replaces the list; an empty value clears it.
	Providers []string `sep:"," help:"Providers (by their configured name) the key's requests may go to, comma-separated (default: the project's)."`
	Expires   string   `help:"Lifetime (30d, 12h) or an RFC 3339 time."`
	Label     []string `sep:"none" help:"A label NAME=VALUE; repeat for more (replaces the labels)."`
	// ModelLimit is repeatable; given at all, the list replaces the
	// key's model limits, and "none" clears them.
	ModelLimit []string `name:"model-limit" sep:"none" help:"Rates for one model as MODEL=RPM/TPM (0 = unlimited; MODEL=RPM sets no token rate); repeat for more (replaces them); none clears."`
	NoCache    *bool    `name:"no-cache" help:"Bar the key from the response cache (--no-cache=false lets it back)."`
}

func (k *keySettings) body(b settings, modelsGiven bool) (settings, error) {
	b.str("name", k.Name)
	b.int("rpm", k.RPM)
	b.int("tpm", k.TPM)
	if err := b.budget(k.Budget); err != nil {
		return nil, err
	}
	b.list("models", k.Models, modelsGiven)
	b.list("providers", k.Providers, k.Providers != nil)
	if k.ModelLimit != nil {
		ml, err := parseModelLimits(k.ModelLimit)
		if err != nil {
			return nil, err
		}
		b["model_limits"] = ml
	}
	if k.Expires != "" {
		t, err := parseExpiry(k.Expires, time.Now())
		if err != nil {
			return nil, err
		}
		b["expires_at"] = t
	}
	if err := b.labels(k.Label); err != nil {
		return nil, err
	}
	if k.NoCache != nil {
		b["no_cache"] = *k.NoCache
	}
	return b, nil
}

// parseModelLimits reads --model-limit values: MODEL=RPM/TPM or
// MODEL=RPM; a lone "none" clears (JSON null).
func parseModelLimits(vals []string) (any, error) {
	if len(vals) == 1 && vals[0] == "none" {
		return nil, nil
	}
	out := make(map[string]map[string]int, len(vals))
	for _, v := range vals {
		model, rates, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("--model-limit %q: want MODEL=RPM/TPM, e.g. gpt-4o=60/100000", v)
		}
		rpm, tpm, _ := strings.Cut(rates, "/")
		lim := map[string]int{}
		for name, s := range map[string]string{"rpm": rpm, "tpm": tpm} {
			if s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--model-limit %q: %s must be a whole number of 0 or more, not %q", v, name, s)
			}
			lim[name] = n
		}
		if _, dup := out[model]; dup {
			return nil, fmt.Errorf("--model-limit: model %q given twice", model)
		}
		out[model] = lim
	}
	return out, nil
}

type keysCreateCmd struct {
	adminFlags  `embed:""`
	keySettings `embed:""`
	Project     string `required:"" help:"Project ID or name."`
}

func (c *keysCreateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysCreateCmd) run(ctx context.Context, w io.Writer) error {
	body, err := c.body(settings{"project": c.Project}, len(c.Models) > 0)
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPost, "/admin/keys", body)
	if err != nil {
		return err
	}
	return c.showSecret(w, raw, "Created")
}

type keysUpdateCmd struct {
	adminFlags  `embed:""`
	keySettings `embed:""`
	ID          string `arg:"" help:"Key ID."`
}

func (c *keysUpdateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysUpdateCmd) run(ctx context.Context, w io.Writer) error {
	body, err := c.body(settings{}, c.Models != nil)
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPatch, pathID("keys", c.ID), body)
	if err != nil {
		return err
	}
	return c.show(w, raw, keyFields)
}

// showSecret prints a key with the secret the API shows this once.
func (f *adminFlags) showSecret(w io.Writer, raw []byte, verb string) error {
	if f.JSON {
		return printJSON(w, raw)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s key %s in project %s.\n\n", verb, cell(rec["id"]), cell(rec["project_id"]))
	fmt.Fprintf(w, "    %s\n\n", rec["key"])
	fmt.Fprintln(w, "This secret is shown once and cannot be recovered: store it now.")
	return nil
}

type keysListCmd struct {
	adminFlags `embed:""`
	Project    string `help:"Only keys of this project (ID or name)."`
	Search     string `help:"Only keys whose name contains this (any case) or whose prefix or ID starts with it."`
}

func (c *keysListCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysListCmd) run(ctx context.Context, w io.Writer) error {
	q := url.Values{}
	if c.Project != "" {
		q.Set("project", c.Project)
	}
	if c.Search != "" {
		q.Set("search", c.Search)
	}
	rows, err := c.listAll(ctx, "/admin/keys", q)
	if err != nil {
		return err
	}
	return c.showList(w, rows, keyColumns)
}

type keysGetCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"Key ID."`
}

func (c *keysGetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysGetCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, pathID("keys", c.ID), nil)
	if err != nil {
		return err
	}
	return c.show(w, raw, keyFields)
}

type keysRevokeCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"Key ID."`
}

func (c *keysRevokeCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysRevokeCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodDelete, pathID("keys", c.ID), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	fmt.Fprintf(w, "Revoked key %s.\n", c.ID)
	return nil
}

type keysRotateCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"Key ID."`
}

func (c *keysRotateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *keysRotateCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodPost, pathID("keys", c.ID)+"/rotate", nil)
	if err != nil {
		return err
	}
	return c.showSecret(w, raw, "Rotated")
}

// projectsCmd: gatehouse projects create|list|get|update|delete.
type projectsCmd struct {
	Create projectsCreateCmd `cmd:"" help:"Create a project."`
	List   projectsListCmd   `cmd:"" help:"List projects."`
	Get    projectsGetCmd    `cmd:"" help:"Show a project."`
	Update projectsUpdateCmd `cmd:"" help:"Change a project's settings (only the flags given)."`
	Delete projectsDeleteCmd `cmd:"" help:"Delete a project (refused while it has active keys)."`
}

var projectColumns = []column{
	{"ID", str("id")}, {"NAME", str("name")}, {"RPM", str("rpm")}, {"TPM", str("tpm")}, {"BUDGET", str("budget")},
	{"MODELS", str("models")}, {"READ ONLY", str("read_only")}, {"CREATED", str("created_at")},
}

var projectFieldOrder = []string{"id", "name", "read_only", "rpm", "tpm", "budget", "models", "providers", "labels", "cache", "log_bodies", "created_at", "updated_at"}

// projectSettings are the flags of create and update.
type projectSettings struct {
	RPM       *int     `name:"rpm" help:"Requests per minute over all the project's keys (0 = unlimited)."`
	TPM       *int     `name:"tpm" help:"Tokens per minute (0 = unlimited)."`
	Budget    *string  `help:"Spend cap as USD/PERIOD, e.g. 100/month; none clears it."`
	Models    []string `sep:"," help:"Allowed models, comma-separated; an empty value allows all."`
	Providers []string `sep:"," help:"Providers (by their configured name) the project's requests may go to, comma-separated; an empty value allows all."`
	Label     []string `sep:"none" help:"A label NAME=VALUE; repeat for more (replaces the labels)."`
	Cache     *bool    `help:"Turn the exact response cache on or off for the project (default: the config's)."`
	CacheTTL  *int     `name:"cache-ttl" help:"Seconds the project's cached answers are kept (0: the config's cache.exact.ttl)."`
	LogBodies *bool    `name:"log-bodies" help:"Keep request and response bodies in the request log."`
}

func (p *projectSettings) body(b settings, modelsGiven bool) (settings, error) {
	b.int("rpm", p.RPM)
	b.int("tpm", p.TPM)
	if err := b.budget(p.Budget); err != nil {
		return nil, err
	}
	b.list("models", p.Models, modelsGiven)
	b.list("providers", p.Providers, p.Providers != nil)
	if err := b.labels(p.Label); err != nil {
		return nil, err
	}
	if p.Cache != nil || p.CacheTTL != nil {
		exact := map[string]any{}
		if p.Cache != nil {
			exact["enabled"] = *p.Cache
		}
		if p.CacheTTL != nil {
			exact["ttl_seconds"] = *p.CacheTTL
		}
		b["cache"] = map[string]any{"exact": exact}
	}
	if p.LogBodies != nil {
		b["log_bodies"] = *p.LogBodies
	}
	return b, nil
}

type projectsCreateCmd struct {
	adminFlags      `embed:""`
	projectSettings `embed:""`
	Name            string `arg:"" help:"Unique project name (letters, digits, - _ .)."`
}

func (c *projectsCreateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *projectsCreateCmd) run(ctx context.Context, w io.Writer) error {
	body, err := c.body(settings{"name": c.Name}, len(c.Models) > 0)
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPost, "/admin/projects", body)
	if err != nil {
		return err
	}
	return c.show(w, raw, projectFieldOrder)
}

type projectsListCmd struct {
	adminFlags `embed:""`
}

func (c *projectsListCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *projectsListCmd) run(ctx context.Context, w io.Writer) error {
	rows, err := c.listAll(ctx, "/admin/projects", url.Values{})
	if err != nil {
		return err
	}
	return c.showList(w, rows, projectColumns)
}

type projectsGetCmd struct {
	adminFlags `embed:""`
	Project    string `arg:"" help:"Project ID or name."`
}

func (c *projectsGetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *projectsGetCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, pathID("projects", c.Project), nil)
	if err != nil {
		return err
	}
	return c.show(w, raw, projectFieldOrder)
}

type projectsUpdateCmd struct {
	adminFlags      `embed:""`
	projectSettings `embed:""`
	Project         string  `arg:"" help:"Project ID or name."`
	Name            *string `help:"A new name."`
}

func (c *projectsUpdateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *projectsUpdateCmd) run(ctx context.Context, w io.Writer) error {
	b := settings{}
	b.str("name", c.Name)
	body, err := c.body(b, c.Models != nil)
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPatch, pathID("projects", c.Project), body)
	if err != nil {
		return err
	}
	return c.show(w, raw, projectFieldOrder)
}

type projectsDeleteCmd struct {
	adminFlags `embed:""`
	Project    string `arg:"" help:"Project ID or name."`
}

func (c *projectsDeleteCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *projectsDeleteCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodDelete, pathID("projects", c.Project), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	fmt.Fprintf(w, "Deleted project %s.\n", c.Project)
	return nil
}

// customersCmd: gatehouse customers create|list|get|update|delete.
type customersCmd struct {
	Create customersCreateCmd `cmd:"" help:"Create a customer of a project."`
	List   customersListCmd   `cmd:"" help:"List customers."`
	Get    customersGetCmd    `cmd:"" help:"Show a customer."`
	Update customersUpdateCmd `cmd:"" help:"Change a customer (only the flags given)."`
	Delete customersDeleteCmd `cmd:"" help:"Delete a customer."`
}

var customerColumns = []column{
	{"ID", str("id")}, {"PROJECT", str("project_id")}, {"EXTERNAL ID", str("external_id")}, {"NAME", str("name")},
	{"DAILY USD", str("daily_usd")}, {"MONTHLY USD", str("monthly_usd")}, {"ON EXCEED", str("on_exceed")},
	{"DOWNGRADE TO", str("downgrade_model")},
}

var customerFieldOrder = []string{"id", "project_id", "external_id", "name", "daily_usd", "monthly_usd", "on_exceed",
	"downgrade_model", "labels", "created_at", "updated_at"}

// customerSettings are the flags of create and update.
type customerSettings struct {
	Name           *string  `help:"A name for people."`
	DailyUSD       *float64 `name:"daily-usd" help:"Budget per UTC day in USD."`
	MonthlyUSD     *float64 `name:"monthly-usd" help:"Budget per UTC month in USD."`
	OnExceed       *string  `name:"on-exceed" help:"Over budget: block or downgrade."`
	DowngradeModel *string  `name:"downgrade-model" help:"The cheaper model for on-exceed downgrade."`
	Label          []string `sep:"none" help:"A label NAME=VALUE; repeat for more (replaces the labels)."`
}

func (s *customerSettings) body(b settings) (settings, error) {
	b.str("name", s.Name)
	b.float("daily_usd", s.DailyUSD)
	b.float("monthly_usd", s.MonthlyUSD)
	if s.OnExceed != nil && *s.OnExceed != "" {
		b["on_exceed"] = *s.OnExceed
	}
	b.str("downgrade_model", s.DowngradeModel)
	if err := b.labels(s.Label); err != nil {
		return nil, err
	}
	return b, nil
}

type customersCreateCmd struct {
	adminFlags       `embed:""`
	customerSettings `embed:""`
	Project          string `required:"" help:"Project ID or name."`
	ExternalID       string `name:"external-id" required:"" help:"The x-gatehouse-customer header or user field naming the customer."`
}

func (c *customersCreateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *customersCreateCmd) run(ctx context.Context, w io.Writer) error {
	body, err := c.body(settings{"project": c.Project, "external_id": c.ExternalID})
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPost, "/admin/customers", body)
	if err != nil {
		return err
	}
	return c.show(w, raw, customerFieldOrder)
}

type customersListCmd struct {
	adminFlags `embed:""`
	Project    string `help:"Only customers of this project (ID or name)."`
}

func (c *customersListCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *customersListCmd) run(ctx context.Context, w io.Writer) error {
	q := url.Values{}
	if c.Project != "" {
		q.Set("project", c.Project)
	}
	rows, err := c.listAll(ctx, "/admin/customers", q)
	if err != nil {
		return err
	}
	return c.showList(w, rows, customerColumns)
}

type customersGetCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"Customer ID."`
}

func (c *customersGetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *customersGetCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, pathID("customers", c.ID), nil)
	if err != nil {
		return err
	}
	return c.show(w, raw, customerFieldOrder)
}

type customersUpdateCmd struct {
	adminFlags       `embed:""`
	customerSettings `embed:""`
	ID               string  `arg:"" help:"Customer ID."`
	ExternalID       *string `name:"external-id" help:"A new external ID."`
}

func (c *customersUpdateCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *customersUpdateCmd) run(ctx context.Context, w io.Writer) error {
	b := settings{}
	b.str("external_id", c.ExternalID)
	body, err := c.body(b)
	if err != nil {
		return err
	}
	raw, err := c.call(ctx, http.MethodPatch, pathID("customers", c.ID), body)
	if err != nil {
		return err
	}
	return c.show(w, raw, customerFieldOrder)
}

type customersDeleteCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"Customer ID."`
}

func (c *customersDeleteCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *customersDeleteCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodDelete, pathID("customers", c.ID), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	fmt.Fprintf(w, "Deleted customer %s.\n", c.ID)
	return nil
}
